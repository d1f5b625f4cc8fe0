/**
 * The model table: every model the service serves, name -> version -> declaration, with its
 * readiness and statistics. Transport-neutral: HTTP routes and a gRPC service both answer from it,
 * so a model is declared once and every rule (resolution, Triton's errors, what is measured) is
 * written once. Its methods return plain objects and throw `TritonError`s, whose kinds each face
 * maps to its own status.
 */
import type { SystemSharedMemoryRegistry } from '../../types'
import type { ModelSignature, Tensor } from '../../types/kserve'
import type {
  ModelConfigResponse, ModelLoadOverrides, ModelMetadataResponse, ModelStatisticsResponse, RepositoryIndexEntry
} from '../../types/models'
import * as errors from '../errors'
import { InferRequest } from '../kserve/infer-request'
import type { EncodedResponse } from '../kserve/output-tensors'
import { Registry } from '../registry/registry'
import { MemoryModelStore, type ServicePeers } from '../store/model-store'
import type { IncomingCall } from '../store/process-channel'
import { Turns } from '../util/turns'
import { checkDeclaration, DEFAULT_VERSIONS, type ModelDeclaration } from './declaration'
import { runEnsemble, type StepRunner } from './ensemble-flow'
import { type DeclarationsByName, type EnsemblePlan, planEnsembles } from './ensemble-plan'
import { modelConfig, modelMetadata } from './model-config'
import { type ApplyCall, ModelRepository, type RepositoryLogger, serving, type VersionState } from './model-repository'
import {
  failureOf, type ForwardedRequest, forwardedInputBytes, limitsOf, ranNowhere, responseMessage, runAtOwner, sequenceFlagsOf
} from './sequence-forwarding'
import { type SequenceDirectory, SequenceBatcher, type SequenceTurn } from './sequences'
import { type FailureReason, InferenceStatistics, type StatisticsTotals } from './statistics'
import { checkTableOptions, type ModelTableOptions } from './table-options'
import type { TraceChange, TraceValues } from './trace-settings'
import type { RequestTrace } from './request-trace'
import { Tracer } from './tracer'

export type { ModelTableOptions }

/** A loaded version as metrics read it: its totals, and its latest requests' times. */
export interface VersionMetrics {
  name: string
  version: string
  totals(): StatisticsTotals
  samples: InferenceStatistics['samples']
}

/**
 * One inference through `ModelTable.infer`, in the transport's terms: how to read the request,
 * what to do before the run, and how to answer. Each step is timed into the model's statistics.
 */
export interface InferCall<Result> {
  /** Reads the request for the resolved model's signature; `version` is the one that will run,
   * for the response to name (timed as `compute_input`). A request already read is given as
   * `() => infer`. A throw fails the request. */
  read(signature: ModelSignature, version: string): InferRequest
  /** Awaited once the request is read, before the run (timed as `queue`): admission, tracing. */
  beforeRun?(infer: InferRequest): void | Promise<void>
  /** Told once the request's run begins: its sequence's turn and a model instance taken (or it
   * was handed to the process that owns its sequence). Until then it is queued, not in flight: a
   * stream refuses its queued requests when the server stops. */
  started?(infer: InferRequest): void
  /** The response, from the outputs the run filled (timed as `compute_output`). */
  respond(infer: InferRequest): Result
  /** The transport, for Triton's words when it cannot carry a decoupled model's responses
   * (`ModelTable.infer`). Default `http`. */
  transport?: 'http' | 'grpc'
  /** The request's headers (gRPC: metadata as a map), where its client's W3C trace context is
   * read in the `opentelemetry` trace mode; asked only while that mode may trace. */
  traceCarrier?: () => Readonly<Record<string, unknown>>
  /** Told of the trace of a sampled request as it starts, before the table adds to it: the face
   * adds its own instants (Triton's HTTP or gRPC server's), holds it (`trace.hold()`), and ends
   * it once it has answered. */
  traced?(trace: RequestTrace): void
  /** An ensemble step's: the trace of its ensemble's request (null: not traced). A step is traced
   * with its ensemble's request, never on its own (Triton's `parent_id`). */
  ensembleTrace?: RequestTrace | null
}

/**
 * One request of a stream (gRPC's ModelStreamInfer), for any model: `respond` builds each response
 * (a decoupled model's, once per `infer.send()`), `send` sends it.
 */
export interface StreamCall<Result> extends InferCall<Result> {
  /** Sends one response of the request: `result`, or none (the final flag alone, after a decoupled
   * model's last response); `final`: the request's last. Resolves once the transport can take
   * another: a decoupled model's `infer.send()` waits for it. */
  send(result: Result | undefined, final: boolean): Promise<void>
}

/** One version of one model. */
interface ModelVersion extends VersionState {
  readonly version: string
  readonly declaration: ModelDeclaration
  /** What runs a request: the declaration's `run`, or an ensemble's steps. */
  readonly run: (infer: InferRequest) => void | Promise<void>
  /** What `InferRequest` checks requests against: the declaration's signature. */
  readonly signature: ModelSignature
  ready: boolean
  readonly statistics: InferenceStatistics
  /** A stateful model's sequences. */
  readonly sequences?: SequenceBatcher
  /** A model with a number of instances: its runs wait for one. */
  readonly instances?: Turns
}

/** A version as declared: loaded, with no request in flight. */
const NEW_VERSION_STATE = { loaded: true, loading: false, reason: '', inFlight: 0, drained: undefined }

const byVersion = (a: ModelVersion, b: ModelVersion) => Number(a.version) - Number(b.version)

/** Clients may send `007` for version 7, as Triton reads versions as numbers. */
function canonicalVersion (version: string): string {
  if (!/^\d+$/.test(version)) throw errors.invalidModelVersion(version)
  return String(BigInt(version))
}

function batchSizeOf ({ signature }: ModelVersion, infer: InferRequest): number {
  return (signature.maxBatchSize ?? 0) > 0 ? infer.inputs[0]?.shape[0] ?? 1 : 1
}

function signatureOf ({ name, platform, maxBatchSize, inputs, outputs }: ModelDeclaration, versions: string[]): ModelSignature {
  return { name, versions, ...(platform !== undefined && { platform }), ...(maxBatchSize !== undefined && { maxBatchSize }), inputs, outputs }
}

/** Why a request failed, in Triton's terms: its client went away, its admission refused it,
 * its model failed, or anything else. */
function failureReason (error: unknown, signal: AbortSignal | undefined, running: boolean): FailureReason {
  if (signal?.aborted === true || (error as { kind?: unknown } | null)?.kind === 'cancelled') return 'CANCELED'
  if (running) return 'BACKEND'
  const { kind, statusCode } = (error ?? {}) as { kind?: unknown, statusCode?: unknown }
  return kind === 'exhausted' || statusCode === 429 || statusCode === 503 ? 'REJECTED' : 'OTHER'
}

export class ModelTable {
  /** By name, then by version in ascending order. */
  readonly #models = new Map<string, ModelVersion[]>()
  readonly #repository: ModelRepository
  readonly #servesRepository: boolean
  readonly #processStatistics: boolean
  readonly #log: RepositoryLogger | undefined
  /** Triton's trace settings, global and per model, and the traces they take. */
  readonly #tracer: Tracer
  /** The shared registry whose store holds this table's statistics and repository state. */
  #registry: Registry | undefined
  /** The other processes of its service, which own some sequences and run their requests. */
  #peers: ServicePeers | undefined

  /**
   * Checks every declaration (an `ERR_SHM_INVALID_MODEL_DECLARATION` TypeError names the model and
   * the field that is wrong). One name
   * may be declared several times, for distinct versions.
   */
  constructor (declarations: Iterable<ModelDeclaration>, options: ModelTableOptions = {}) {
    const store = new MemoryModelStore()
    const declared: DeclarationsByName = new Map()
    for (const declaration of declarations) {
      checkDeclaration(declaration)
      declared.set(declaration.name, [...declared.get(declaration.name) ?? [], declaration])
    }
    const ensembles = planEnsembles(declared)
    for (const versionsOfName of declared.values()) {
      for (const declaration of versionsOfName) this.#declare(store, ensembles.get(declaration), declaration)
    }
    const { repository = false, processStatistics = false, log, trace } = checkTableOptions(options, [...this.#models.keys()])
    this.#tracer = new Tracer(store, trace, log)
    this.#servesRepository = repository !== false
    this.#processStatistics = processStatistics
    this.#log = log
    this.#repository = new ModelRepository(store, (name) => this.#models.get(name), () => this.names,
      typeof repository === 'object' ? repository : {}, log)
  }

  /** Adds the versions of one declaration; an ensemble's, with its plan: decoupled if a step is,
   * run step by step. */
  #declare (store: MemoryModelStore, ensemble: EnsemblePlan | undefined, given: ModelDeclaration): void {
    const declaration: ModelDeclaration = ensemble === undefined
      ? given
      : { ...given, platform: 'ensemble', decoupled: ensemble.decoupled, run: (infer) => runEnsemble(ensemble, infer, this.#stepRunner(infer)) }
    const { name, versions = DEFAULT_VERSIONS, ready = true, sequenceBatching, maxBatchSize = 0, instanceCount } = declaration
    const known = this.#models.get(name) ?? []
    const taken = known.find(({ version }) => versions.includes(version))
    if (taken !== undefined) throw errors.modelVersionDeclaredTwice(name, taken.version)
    const signature = signatureOf(declaration, versions)
    known.push(...versions.map((version) => ({
      version,
      declaration,
      run: declaration.run as NonNullable<ModelDeclaration['run']>,
      signature,
      ready,
      statistics: new InferenceStatistics(store.cells(name, version)),
      ...NEW_VERSION_STATE,
      ...(sequenceBatching !== undefined && { sequences: new SequenceBatcher(name, sequenceBatching, maxBatchSize > 0) }),
      ...(instanceCount !== undefined && { instances: new Turns(instanceCount) })
    })))
    this.#models.set(name, known.sort(byVersion))
  }

  /** Runs the steps of an ensemble's request `infer`: each on the version it names (or the newest
   * ready), as a request of `infer`'s, measured in its own model's statistics. */
  #stepRunner (infer: InferRequest): StepRunner {
    return async (step, inputs, answer) => {
      const model = await this.#serving(step.model, step.version)
      let request: InferRequest | undefined
      const call: StreamCall<Tensor[]> = {
        ensembleTrace: this.#tracer.traceOf(infer) ?? null,
        read: (signature, version) => {
          request = infer.forModel(signature, version, inputs, Object.keys(step.outputMap))
          return request
        },
        respond: (read) => read.storedOutputs,
        send: async (outputs) => { if (outputs !== undefined) await answer(outputs) }
      }
      try {
        if (model.declaration.decoupled === true) await this.#run(model, call, call)
        else await answer(await this.#run(model, call) as Tensor[])
      } finally {
        request?.release()
      }
    }
  }

  /** Whether the faces serve the model repository extension from this table. */
  get servesRepository (): boolean {
    return this.#servesRepository
  }

  /**
   * Shares this table's statistics, repository state and sequences with every process of
   * `registry`'s service, when it is a shared registry (`sharedRegistry`); the faces call it for
   * the registry they serve. Counts made before are added to the shared ones. A sequence belongs
   * to the process that started it: a request of it that reaches another process runs there. A
   * table serves one shared registry: another one throws `ERR_SHM_MODEL_TABLE_SHARED`.
   */
  serveWith (registry: SystemSharedMemoryRegistry): void {
    // In the opentelemetry trace mode, the shared memory API's calls are spans too.
    const operationSpans: Registry['operationSpans'] = (options) => this.#tracer.operation(options)
    if (registry instanceof Registry && this.#tracer.spans !== undefined) registry.operationSpans = operationSpans
    if (!(registry instanceof Registry) || registry === this.#registry) return
    const store = registry.modelStore()
    if (!store.shared) return
    if (this.#registry !== undefined) throw errors.modelTableShared()
    this.#registry = registry
    if (!this.#processStatistics) {
      for (const [name, versions] of this.#models) for (const entry of versions) entry.statistics.moveTo(store.cells(name, entry.version))
    }
    const peers = store.peers as ServicePeers
    this.#peers = peers
    for (const [name, versions] of this.#models) {
      for (const { version, sequences } of versions) sequences?.shareWith(sequenceDirectory(peers, name, version))
    }
    peers.serve((call) => this.#answer(call))
    this.#repository.attach(store)
    this.#tracer.attach(store)
  }

  /** Every model name, in the order declared. */
  get names (): string[] {
    return [...this.#models.keys()]
  }

  /** Every version of `name` (throws 404 for an unknown model). */
  #versions (name: string): ModelVersion[] {
    this.#repository.sync()
    const versions = this.#models.get(name)
    if (versions === undefined) throw errors.unknownModel(name)
    return versions
  }

  /** The version a request names, ready or not (400 for a version that is no number, 404 unknown). */
  #declared (name: string, version: string): ModelVersion {
    const wanted = canonicalVersion(version)
    const found = this.#versions(name).find((entry) => entry.version === wanted)
    if (found === undefined) throw errors.unknownModelVersion(name, version)
    return found
  }

  /** The version to serve, as Triton resolves it: the one named, which must be ready, or else the
   * newest ready one. */
  #resolve (name: string, version?: string): ModelVersion {
    if (version !== undefined) {
      const found = this.#declared(name, version)
      if (!serving(found)) throw errors.modelVersionNotReady(name, found.version)
      return found
    }
    const versions = this.#versions(name)
    // Newest first, with no array made: this runs for every request.
    for (let index = versions.length - 1; index >= 0; index--) if (serving(versions[index])) return versions[index]
    throw errors.noAvailableVersion(name)
  }

  #readyVersions (name: string): ModelVersion[] {
    return this.#versions(name).filter(serving)
  }

  /** Server readiness: every model has a ready version, but those a client or the host unloaded
   * (as Triton's). */
  isReady (): boolean {
    return this.names.every((name) => this.#readyVersions(name).length > 0 || this.#repository.unloadedOnRequest(name))
  }

  /** Whether the version (default: any version) of the model is ready; throws for an unknown one. */
  isModelReady (name: string, version?: string): boolean {
    if (version !== undefined) return serving(this.#declared(name, version))
    return this.#readyVersions(name).length > 0
  }

  /** Marks a version ready or not (a model loading, reloading, or taken out of service). A version
   * that is not ready answers 503; with none ready, a request naming no version answers 404. */
  setReady (name: string, version: string, ready: boolean): void {
    this.#declared(name, version).ready = ready
  }

  /** The signature requests for the version (default: the newest ready) are checked against. */
  signature (name: string, version?: string): ModelSignature {
    return this.#resolve(name, version).signature
  }

  /** The KServe model metadata (`GET /v2/models/<m>[/versions/<v>]`). */
  metadata (name: string, version?: string): ModelMetadataResponse {
    const { declaration } = this.#resolve(name, version)
    return modelMetadata(declaration, this.#readyVersions(name).map((entry) => entry.version))
  }

  /** Triton's model configuration (`GET /v2/models/<m>[/versions/<v>]/config`). */
  config (name: string, version?: string): ModelConfigResponse {
    const { declaration } = this.#resolve(name, version)
    return modelConfig(declaration, this.#versions(name).map((entry) => entry.version))
  }

  /**
   * Triton's statistics: of every ready version of every model (no name), of every ready version
   * of `name` (no version: perf_analyzer then watches which version's `queue.count` grows), or of
   * one version. A version never run has every count 0.
   */
  statistics (name?: string, version?: string): ModelStatisticsResponse {
    let entries: Array<[string, ModelVersion]>
    if (name === undefined) {
      entries = [...this.#models.keys()].sort().flatMap((model) => this.#readyVersions(model).map((entry) => [model, entry] as [string, ModelVersion]))
    } else if (version === undefined) {
      this.#resolve(name)
      entries = this.#readyVersions(name).map((entry) => [name, entry])
    } else {
      entries = [[name, this.#resolve(name, version)]]
    }
    return { model_stats: entries.map(([model, entry]) => entry.statistics.toJSON(model, entry.version)) }
  }

  /** Whether the version (default: the newest ready) is decoupled (answers over streams only). */
  isDecoupled (name: string, version?: string): boolean {
    return this.#resolve(name, version).declaration.decoupled === true
  }

  /** The repository index: every declared version of every model, by name then version, with its
   * state (`READY`, `UNAVAILABLE` with its reason, `LOADING`); only the ready ones if `readyOnly`. */
  index (readyOnly = false): RepositoryIndexEntry[] {
    return this.#repository.index(readyOnly)
  }

  /** Triton's trace settings: of `model` (which must be ready: Triton's `Request for unknown
   * model`), or the global ones. */
  traceSettings (model?: string): TraceValues {
    this.#checkTraced(model)
    return this.#tracer.settings.values(model)
  }

  /** Changes Triton's trace settings of `model` (or the global ones) in every process of the
   * service, and returns them (see `TraceSettings.update`). */
  updateTraceSettings (model: string | undefined, change: TraceChange): TraceValues {
    this.#checkTraced(model)
    return this.#tracer.settings.update(model, change)
  }

  /** Writes the traces taken so far to their files, and closes them: the faces call it as their
   * server stops. */
  closeTraces (): Promise<void> {
    return this.#tracer.close()
  }

  #checkTraced (model: string | undefined): void {
    if (model !== undefined && !(this.names.includes(model) && this.isModelReady(model))) throw errors.traceUnknownModel(model)
  }

  /** Loads (or reloads) every version of a declared model, in every process of the service, and
   * resolves once each serves it (see `ModelRepository.load`: its hooks, overrides and errors). */
  load (name: string, overrides?: ModelLoadOverrides): Promise<void> {
    return this.#repository.load(name, overrides)
  }

  /** Unloads every version of a model, in every process of the service (resolves once none serves
   * it); an unknown one is a success. */
  unload (name: string): Promise<void> {
    return this.#repository.unload(name)
  }

  /** Every loaded version of every model, by name then version, with its statistics: what
   * Triton's metrics report (a version unloaded has none, as in Triton). */
  metricVersions (): VersionMetrics[] {
    this.#repository.sync()
    return [...this.#models.keys()].sort().flatMap((name) => (this.#models.get(name) as ModelVersion[])
      .filter((entry) => entry.loaded)
      .map(({ version, statistics }) => ({ name, version, totals: () => statistics.totals(), samples: (sinceMs: number) => statistics.samples(sinceMs) })))
  }

  /**
   * Runs one inference on the version (default: the newest ready) of a model, measured into its
   * statistics: `call.read` reads the request for its signature (`compute_input`),
   * `call.beforeRun` waits (`queue`, with the wait of a stateful model's request for the earlier
   * ones of its sequence), the declaration's `run` runs unless the client has gone
   * (`compute_infer`), `call.respond` builds the answer (`compute_output`), which is returned.
   * Resolution errors (and a decoupled model, which this one answer cannot serve: Triton's
   * UNSUPPORTED) throw before anything is counted; any later throw counts as a failed request and
   * is rethrown. Leases the request holds are the caller's to release (`readInferRequest`
   * releases them when the HTTP reply ends; any other transport calls `infer.release()`).
   */
  async infer<Result> (name: string, version: string | undefined, call: InferCall<Result>): Promise<Result> {
    const serving = this.#serving(name, version)
    const model = serving instanceof Promise ? await serving : serving
    if (model.declaration.decoupled === true) {
      throw errors.decoupledNotSupported(call.transport === 'grpc' ? 'ModelInfer RPC' : 'HTTP end point')
    }
    // Awaited: an async function that returns a promise resolves a turn of the queue later.
    return await this.#run(model, call) as Result
  }

  /**
   * Runs one request of a stream on any model, as `infer` does: a model that is not decoupled has
   * its one response sent (final); a decoupled one's run sends each of its responses as it goes
   * (`infer.send()`), then its end sends the final flag alone unless its last response had it.
   * Resolves once the final response was sent. Leases end as for `infer`: the caller's, once this
   * settles (a decoupled model's responses all use the request's regions).
   */
  async stream<Result> (name: string, version: string | undefined, call: StreamCall<Result>): Promise<void> {
    const model = await this.#serving(name, version)
    if (model.declaration.decoupled !== true) return await call.send(await this.#run(model, call), true)
    await this.#run(model, call, call)
  }

  /** Releases every sequence of every stateful model (the server is closing): what their state
   * holds is let go, and later requests must start their sequences again. */
  endSequences (): void {
    for (const versions of this.#models.values()) for (const { sequences } of versions) sequences?.endAll()
    try {
      this.#peers?.dropSequences()
    } catch {
      // The store failed: the records name this process, which its peers see die or not own them.
    }
  }

  /** The version a request runs on. A model loading in this process (its hook runs, for a load
   * here or one just read from the store) is waited for, not refused. */
  #serving (name: string, version: string | undefined): ModelVersion | Promise<ModelVersion> {
    this.#repository.sync()
    const loading = this.#repository.loadingOf(name)
    // A promise only while the model loads: every request awaiting one would pay a turn of the queue.
    if (loading !== undefined) return loading.then(() => this.#resolve(name, version))
    return this.#resolve(name, version)
  }

  /** `here`: the request was handed over by another process, as this one owns its sequence. */
  async #run<Result> (model: ModelVersion, call: InferCall<Result>, stream?: StreamCall<Result>, here = false): Promise<Result | undefined> {
    const start = performance.now()
    const { statistics } = model
    const trace = this.#startTrace(model, call, here)
    model.inFlight++
    statistics.started()
    let infer: InferRequest | undefined
    let turn: SequenceTurn | undefined
    let instance: (() => void) | undefined
    let pending = true
    let running = false
    let forwarded = false
    let result: Result | undefined
    let read: number | undefined
    let runStart: number | undefined
    let ran: number | undefined
    let end: number | undefined
    let failure: { error: unknown } | undefined
    try {
      infer = call.read(model.signature, model.version)
      read = performance.now()
      if (trace !== undefined && model.declaration.platform === 'ensemble') this.#tracer.follow(infer, trace)
      // At once, so a stream's requests of one sequence are queued in the order they were read.
      const place = model.sequences?.route(infer, batchSizeOf(model, infer), here)
      if (place?.owner !== undefined) {
        // Counted by the process that runs it; here, only if it cannot.
        forwarded = true
        pending = false
        statistics.running()
        return await this.#forward(model, infer, place.owner, call, stream)
      }
      turn = place?.turn
      // Each wait only where there is one: an await of nothing still costs a turn of the queue.
      if (call.beforeRun !== undefined) await call.beforeRun(infer)
      if (turn !== undefined) await untilTurn(turn, infer)
      if (model.instances !== undefined) instance = await model.instances.take(infer)
      infer.throwIfAbandoned()
      call.started?.(infer)
      const sending = infer
      // Triton's first-response histogram: a decoupled request's first response, sent as it runs.
      let firstResponse: number | undefined
      if (stream !== undefined) {
        sending.sendResponsesTo((final) => {
          firstResponse ??= performance.now()
          return stream.send(call.respond(sending), final)
        })
      }
      runStart = performance.now()
      pending = false
      running = true
      statistics.running()
      let finalSent: boolean
      try {
        const running = model.run(infer)
        if (running !== undefined) await running
      } finally {
        finalSent = infer.endResponses()
      }
      ran = performance.now()
      running = false
      if (stream === undefined) result = call.respond(infer)
      else if (!finalSent) await stream.send(undefined, true)
      end = performance.now()
      // A model that is not decoupled answers once, now.
      if (model.declaration.decoupled !== true) firstResponse = end
      statistics.succeeded({ start, read, runStart, ran, end, firstResponse }, batchSizeOf(model, infer))
    } catch (error) {
      if (!forwarded || ranNowhere(error)) statistics.failed(start, failureReason(error, infer?.signal, running), pending)
      failure = { error }
      throw error
    } finally {
      // Triton writes the trace of a failed request too, with the instants it reached.
      if (trace !== undefined) {
        this.#tracer.record(trace, { model: model.declaration.name, version: model.version, requestId: infer?.id },
          { start, read, runStart, ran, end: end ?? performance.now() }, model.declaration.platform === 'ensemble', failure)
      }
      instance?.()
      turn?.done()
      if (--model.inFlight === 0 && model.drained !== undefined) {
        const drained = model.drained
        model.drained = undefined
        drained()
      }
    }
    return result
  }

  /** The trace of a request now reaching `model`, if it is traced: sampled by its settings, or
   * an ensemble step's, with its ensemble's request. One handed over by another process is traced
   * there. The face is told of it first. */
  #startTrace (model: ModelVersion, call: InferCall<unknown>, here: boolean): RequestTrace | undefined {
    const parent = call.ensembleTrace
    if (here || parent === null) return undefined
    const trace = parent === undefined ? this.#tracer.start(model.declaration.name, call.traceCarrier) : this.#tracer.startStep(parent)
    if (trace !== undefined) call.traced?.(trace)
    return trace
  }

  /** Runs a request in the process that owns its sequence, and answers what it sends back. */
  async #forward<Result> (model: ModelVersion, infer: InferRequest, owner: number, call: InferCall<Result>,
    stream?: StreamCall<Result>): Promise<Result | undefined> {
    await call.beforeRun?.(infer)
    call.started?.(infer)
    let result: Result | undefined
    await runAtOwner(this.#peers as ServicePeers, owner, model.declaration.name, model.version, infer, async (answered, final) => {
      if (stream === undefined) result = call.respond(infer)
      else await stream.send(answered ? call.respond(infer) : undefined, final)
    })
    return result
  }

  /** Takes a call of another process of the service about a model of this table: a request of a
   * sequence this process owns, or a load or unload to apply before that process answers. */
  #answer (call: IncomingCall): boolean {
    const head = call.head as ForwardedRequest | ApplyCall
    if (!this.#models.has(head.model)) return false
    const answering = head.kind === 'apply' ? this.#repository.answerApply(call) : this.#runForwarded(head, call)
    answering.catch((error: unknown) => {
      const failure = failureOf(error)
      if (failure.statusCode === 500) this.#log?.error({ err: error }, 'a request handed over by another process of the service failed')
      call.fail(failure)
    })
    return true
  }

  /** Runs a request another process handed over, as this one owns its sequence; each response
   * goes back as the call's replies (a decoupled model's: each once the other process took it). */
  async #runForwarded (request: ForwardedRequest, call: IncomingCall): Promise<void> {
    const registry = this.#registry as Registry
    const reservation = registry.inFlight.open()
    let infer: InferRequest | undefined
    try {
      reservation.charge(call.parts.reduce((total, part) => total + part.byteLength, 0))
      const model = await this.#serving(request.model, request.version)
      const forwarded: StreamCall<EncodedResponse> = {
        read: (signature, modelVersion) => {
          const read = infer = new InferRequest(request.request, forwardedInputBytes(call.parts),
            { registry, model: signature, modelVersion, limits: limitsOf(request), sequence: sequenceFlagsOf(request), reservation, outputCopies: 1 })
          call.signal.addEventListener('abort', () => read.abandon(), { once: true })
          return read
        },
        // Cancelled before it was read: it never runs.
        beforeRun: () => call.signal.throwIfAborted(),
        respond: (read) => read.encode(),
        send: async (response, final) => {
          if (final) call.end(responseMessage(response))
          else await call.reply(responseMessage(response))
        }
      }
      if (model.declaration.decoupled === true) await this.#run(model, forwarded, forwarded, true)
      else await forwarded.send(await this.#run(model, forwarded, undefined, true), true)
    } finally {
      infer?.release()
      reservation.release()
    }
  }
}

/** Waits for a request's turn in its sequence; a request abandoned meanwhile fails at once. */
function untilTurn ({ ready }: SequenceTurn, infer: InferRequest): Promise<void> {
  return new Promise((resolve, reject) => {
    const stopListening = infer.onAbandoned(reject)
    ready.finally(stopListening).then(resolve, reject)
  })
}

/** The directory of a model version's sequences among the processes of its service. A record
 * that cannot be dropped (the store failed) names this process, which its peers find does not
 * own it any more, or see die. */
function sequenceDirectory (peers: ServicePeers, model: string, version: string): SequenceDirectory {
  const key = (id: string) => ({ model, version, id })
  return {
    self: peers.self,
    owner: (id) => peers.sequenceOwner(key(id)),
    claim: (id) => peers.claimSequence(key(id)),
    drop: (id) => {
      try {
        peers.dropSequence(key(id))
      } catch {}
    }
  }
}
