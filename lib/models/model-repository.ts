/**
 * Triton's model repository extension over the model table: the index of every declared model
 * version with its state, and the load and unload of a model (all its versions), as a client asks
 * for them. The repository's state lives in the table's store: with a shared registry, in the
 * store every process of the service reads, so a model one process unloads is unloaded in all of
 * them, each running its own hooks (`load`, `unload` of the declaration) for its own copy.
 *
 * Every model starts loaded (the host loaded it when it declared it), but those the table's
 * `startupModels` leave out, as Triton's `--load-model`. An unloaded model answers
 * Triton's errors for requests (`... has no available versions`, `... is not at ready state`) and
 * is not ready; it does not keep the server from being ready, as in Triton.
 */
import type { ModelLoadOverrides, ModelState, RepositoryIndexEntry } from '../../types/models'
import * as errors from '../errors'
import type { ModelRecord, ModelStore } from '../store/model-store'
import type { IncomingCall } from '../store/process-channel'
import type { ModelDeclaration } from './declaration'
import { checkNameToLoad } from './model-name'

/** Triton's model control modes (`--model-control-mode`) that a table has: `none` serves the index
 * and refuses load and unload; `explicit` serves them. */
export type ModelControlMode = 'none' | 'explicit'

export interface ModelRepositoryOptions {
  /**
   * Hand a load request's `config` and `file:<version>/<name>` parameters to the model's `load`
   * hook. They are code for the server to run (a model file is a program for its runtime): off by
   * default, and a load that carries them is refused (403, PERMISSION_DENIED).
   */
  allowOverrides?: boolean
  /**
   * Triton's `--model-control-mode`. `explicit` (the default here) serves load and unload
   * requests; `none` (Triton's default) serves the index, and refuses a load or an unload with
   * Triton's UNAVAILABLE (503) `explicit model load / unload is not allowed if polling is enabled`.
   */
  controlMode?: ModelControlMode
  /**
   * Triton's `--load-model`: the models loaded when the table is made (default: every model). The
   * others start unloaded (`UNAVAILABLE`, reason `unloaded`) until a load request; each name must
   * be declared. Only with `controlMode: 'explicit'`, as Triton's flag.
   */
  startupModels?: string[]
}

/** What the repository keeps of each version of the table. */
export interface VersionState {
  readonly version: string
  readonly declaration: ModelDeclaration
  /** The host's readiness (`ModelTable.setReady`). */
  ready: boolean
  /** Loaded in this process, as the repository's last load or unload left it. */
  loaded: boolean
  /** Its `load` hook is running here, and it was not served before: requests wait for it. */
  loading: boolean
  /** Why it is not loaded here (`unloaded`, or the failure of its load); '' when it is. */
  reason: string
  /** Requests for the version in flight in this process. */
  inFlight: number
  /** Called once `inFlight` falls to 0 (an unload waiting to run its hook). */
  drained: (() => void) | undefined
}

/** A version requests are served by. */
export const serving = (version: VersionState): boolean => version.loaded && !version.loading && version.ready

/** The reason Triton gives an unloaded model. */
export const UNLOADED = 'unloaded'

/** What this process applied of a model's record. */
interface AppliedRecord {
  loaded: boolean
  generation: number
  reason: string
  /** The model's hooks, one after the other. */
  tasks: Promise<void>
  /** How the last record applied went here: settled once this process serves what it says (a
   * load: once its hooks ran), with the failure of a hook. */
  outcome: Promise<HookFailure | undefined>
}

/** A hook that threw: its version, and its message (the reason Triton records). */
class HookFailure {
  constructor (readonly version: string, readonly reason: string) {}
}

/** What a process asks the others after it recorded a load or an unload: to apply it, and say how it went. */
export interface ApplyCall {
  kind: 'apply'
  model: string
}

/** The answer to an `ApplyCall`: the failure of a load hook there, if one failed. */
interface Applied {
  failure?: { version: string, reason: string }
}

/** Linux's NAME_MAX: the longest name of one file or directory, in bytes. */
const NAME_MAX = 255

/** A `file:<path>` parameter whose path has a component longer than a file system takes. */
const unwritablePath = (parameter: string) =>
  parameter.slice('file:'.length).split('/').some((component) => Buffer.byteLength(component) > NAME_MAX)

const reasonOf = (error: unknown) => error instanceof Error ? error.message : String(error)

/** The part of a pino / Fastify logger hook failures in other processes' loads are logged to. */
export interface RepositoryLogger {
  error(object: object, message: string): void
}

export class ModelRepository {
  readonly #versionsOf: (name: string) => VersionState[] | undefined
  readonly #names: () => string[]
  readonly #allowOverrides: boolean
  readonly #controlMode: ModelControlMode
  readonly #log: RepositoryLogger | undefined
  #store: ModelStore
  /** The store's version applied here. */
  #seen: number
  readonly #states = new Map<string, AppliedRecord>()
  /** Loads running here of models that were not served: their requests wait for them. */
  readonly #loading = new Map<string, Promise<void>>()

  constructor (store: ModelStore, versionsOf: (name: string) => VersionState[] | undefined, names: () => string[],
    options: ModelRepositoryOptions = {}, log?: RepositoryLogger) {
    this.#store = store
    this.#seen = store.version
    this.#versionsOf = versionsOf
    this.#names = names
    this.#allowOverrides = options.allowOverrides === true
    this.#controlMode = options.controlMode ?? 'explicit'
    this.#log = log
    if (options.startupModels !== undefined) this.#startWith(options.startupModels)
  }

  /** Leaves every model but `startupModels` (declared ones: the table's options are checked)
   * unloaded, as a client's unload would (no hook runs: the host made each model when it declared
   * it). Every process of a service is made with the same list, so a model none loaded since is
   * unloaded in each without a record in the store. */
  #startWith (startupModels: string[]): void {
    for (const name of this.#names()) {
      if (startupModels.includes(name)) continue
      Object.assign(this.#state(name), { loaded: false, reason: UNLOADED })
      for (const version of this.#versionsOf(name) as VersionState[]) Object.assign(version, { loaded: false, reason: UNLOADED })
    }
  }

  /** Load and unload requests are served only in `explicit` mode: Triton's check, before any other. */
  #checkControl (): void {
    if (this.#controlMode !== 'explicit') throw errors.modelControlDisabled()
  }

  /** Keeps the repository's state in `store` from now on (a shared registry's), and applies what
   * it holds. A load recorded there without overrides is the one the host made at startup. */
  attach (store: ModelStore): void {
    this.#store = store
    for (const record of store.records().values()) {
      if (record.loaded && record.overrides === undefined) this.#state(record.name).generation = record.generation
    }
    this.#seen = Number.NaN
    this.sync()
    store.onCheck(() => this.sync())
  }

  #state (name: string): AppliedRecord {
    let state = this.#states.get(name)
    if (state === undefined) this.#states.set(name, state = { loaded: true, generation: 0, reason: '', tasks: Promise.resolve(), outcome: SERVED })
    return state
  }

  /** Applies the loads and unloads other processes recorded since the last call (cheap when none). */
  sync (): void {
    const records = this.#store.records()
    if (this.#store.version === this.#seen) return
    this.#seen = this.#store.version
    for (const record of records.values()) this.#apply(record)
  }

  #apply (record: ModelRecord): void {
    const versions = this.#versionsOf(record.name)
    if (versions === undefined) return
    const state = this.#state(record.name)
    if (!record.loaded) {
      if (!state.loaded && state.reason === record.reason) return
      const wasLoaded = state.loaded
      // Refused from now on: served by no version here.
      Object.assign(state, { loaded: false, reason: record.reason, outcome: SERVED })
      for (const version of versions) Object.assign(version, { loaded: false, loading: false, reason: record.reason })
      if (wasLoaded) this.#unloadHere(record.name, versions)
      return
    }
    if (state.loaded && state.generation === record.generation) return
    const outcome = this.#loadHere(record.name, versions, record.overrides ?? { files: {} }).then(() => undefined, (failure: HookFailure) => {
      this.#log?.error({ model: record.name, version: failure.version, reason: failure.reason },
        'a model loaded by another process of the service failed to load in this one')
      return failure
    })
    Object.assign(state, { loaded: true, generation: record.generation, reason: '', outcome })
  }

  /** Runs the versions' load hooks here; versions without one are loaded at once. Rejects with
   * the first `HookFailure`, once every hook ran. */
  #loadHere (name: string, versions: VersionState[], overrides: ModelLoadOverrides): Promise<void> {
    const hooked = versions.filter((version) => version.declaration.load !== undefined)
    for (const version of versions) {
      const waits = hooked.includes(version) && !version.loaded
      Object.assign(version, { loaded: true, loading: version.loading || waits, reason: '' })
    }
    if (hooked.length === 0) return Promise.resolve()
    const task = this.#enqueue(name, async () => {
      let failure: HookFailure | undefined
      for (const version of hooked) {
        try {
          await version.declaration.load?.(version.version, overrides)
        } catch (error) {
          failure ??= new HookFailure(version.version, reasonOf(error))
          Object.assign(version, { loaded: false, reason: reasonOf(error) })
        } finally {
          version.loading = false
        }
      }
      if (failure !== undefined) throw failure
    })
    if (hooked.some((version) => version.loading)) {
      const waited = task.catch(() => {})
      this.#loading.set(name, waited)
      waited.finally(() => { if (this.#loading.get(name) === waited) this.#loading.delete(name) })
    }
    return task
  }

  /** Runs the versions' unload hooks here, each once its requests in flight here have ended. */
  #unloadHere (name: string, versions: VersionState[]): void {
    const hooked = versions.filter((version) => version.declaration.unload !== undefined)
    if (hooked.length === 0) return
    this.#enqueue(name, async () => {
      for (const version of hooked) {
        if (version.inFlight > 0) await new Promise<void>((resolve) => { version.drained = resolve })
        try {
          await version.declaration.unload?.(version.version)
        } catch (error) {
          // The model is unloaded all the same: no request reaches it any more.
          this.#log?.error({ model: name, version: version.version, reason: reasonOf(error) }, 'a model version failed to unload')
        }
      }
    }).catch(() => {})
  }

  /** Runs `task` after the model's earlier hooks, whatever their outcome. */
  #enqueue (name: string, task: () => Promise<void>): Promise<void> {
    const state = this.#state(name)
    const run = state.tasks.then(task)
    state.tasks = run.catch(() => {})
    return run
  }

  /** The load running here that requests for `name` must wait for, if any. */
  loadingOf (name: string): Promise<void> | undefined {
    return this.#loading.size === 0 ? undefined : this.#loading.get(name)
  }

  /** Whether the model is unloaded because a client (or the host) asked: it does not keep the
   * server from being ready. */
  unloadedOnRequest (name: string): boolean {
    const state = this.#states.get(name)
    return state !== undefined && !state.loaded && state.reason === UNLOADED
  }

  /** Every version of every model, by name then version, with its state (only the ready ones
   * if `readyOnly`). */
  index (readyOnly: boolean): RepositoryIndexEntry[] {
    this.sync()
    const entries: RepositoryIndexEntry[] = []
    for (const name of [...this.#names()].sort()) {
      for (const version of this.#versionsOf(name) as VersionState[]) {
        const entry = { name, version: version.version, ...stateOf(version) }
        if (!readyOnly || entry.state === 'READY') entries.push(entry)
      }
    }
    return entries
  }

  /**
   * Loads (or reloads) every version of a declared model, in every process of the service: here
   * first (its `load` hooks, awaited), then recorded for the others, and resolves once each of
   * them serves it too (its hooks ran). In control mode `none`, Triton's UNAVAILABLE; a blank
   * name or one that could traverse a path, Triton's INVALID_ARG; an unknown model is Triton's
   * INTERNAL `failed to load '<m>', failed to poll from model repository`; overrides are refused
   * unless allowed; a hook that
   * throws, in any process, fails the load (`load failed for model ...`) and leaves the model
   * unavailable everywhere, with the hook's message as its reason.
   */
  async load (name: string, overrides: ModelLoadOverrides = { files: {} }): Promise<void> {
    this.#checkControl()
    checkNameToLoad(name)
    this.sync()
    const versions = this.#versionsOf(name)
    if (versions === undefined) throw errors.loadUnknownModel(name)
    // Triton writes a load's files into a directory of its own before it polls them: a path no
    // file system can hold fails that poll, whatever the server then does with the files.
    if (Object.keys(overrides.files).some(unwritablePath)) throw errors.loadFileUnwritable(name)
    const overriding = overrides.config !== undefined || Object.keys(overrides.files).length > 0
    if (overriding && !this.#allowOverrides) {
      throw errors.loadOverridesRefused(name, 'this server takes no model configuration or files with a load request ' +
        '(they are code for the server to run): its host did not allow them')
    }
    if (overriding && versions.some((version) => version.declaration.load === undefined)) {
      throw errors.loadOverridesRefused(name, `model '${name}' has no load hook to take a configuration or files`)
    }
    const state = this.#state(name)
    // It rejects with the first hook's failure only.
    let failure = await this.#loadHere(name, versions, overrides).then(() => undefined, (hookFailure: HookFailure) => hookFailure)
    if (failure === undefined) {
      const record = this.#store.write(name, { loaded: true, reason: '', ...(overriding && { overrides }) })
      Object.assign(state, { loaded: true, generation: record.generation, reason: '', outcome: SERVED })
      failure = await this.#appliedEverywhere(name)
      if (failure === undefined) return
    }
    // Versions loaded by this attempt are unloaded with the others, in every process.
    state.loaded = true
    this.#apply(this.#store.write(name, { loaded: false, reason: failure.reason }))
    await this.#appliedEverywhere(name)
    throw errors.loadFailed(name, failure.version, failure.reason)
  }

  /** Unloads every version of a model, in every process of the service: requests for it are
   * refused at once, and it resolves once no process serves it; each process runs its `unload`
   * hooks once its requests in flight end. An unknown model is a success, as in Triton, and so is
   * a name a load would refuse (Triton checks the names of loads only); control mode `none`
   * refuses it. */
  async unload (name: string): Promise<void> {
    this.#checkControl()
    this.sync()
    if (this.#versionsOf(name) === undefined) return
    this.#apply(this.#store.write(name, { loaded: false, reason: UNLOADED }))
    await this.#appliedEverywhere(name)
  }

  /** Has every other process of the service apply what the store now says of `name` (they would
   * at their next request or check), and resolves once each has: with the first failure of a load
   * hook among them. A process that is gone, or serves no model table, is not waited for. */
  async #appliedEverywhere (name: string): Promise<HookFailure | undefined> {
    const peers = this.#store.peers
    if (peers === undefined) return undefined
    const call: ApplyCall = { kind: 'apply', model: name }
    const answers = await Promise.all(peers.others().map((process) =>
      peers.call(process, { head: call, parts: [] }).then(({ head }) => (head as Applied | null)?.failure, () => undefined)))
    const failure = answers.find((answer) => answer !== undefined)
    return failure === undefined ? undefined : new HookFailure(failure.version, failure.reason)
  }

  /** Answers another process's `ApplyCall`: applies the store's records, and says once this
   * process serves what they say of the model (a load: its hooks ran), or how its hook failed. */
  async answerApply (call: IncomingCall): Promise<void> {
    const { model } = call.head as ApplyCall
    this.sync()
    const failure = await this.#state(model).outcome
    const applied: Applied = failure === undefined ? {} : { failure: { version: failure.version, reason: failure.reason } }
    call.end({ head: applied, parts: [] })
  }
}

/** The outcome of a record applied at once. */
const SERVED: Promise<HookFailure | undefined> = Promise.resolve(undefined)

function stateOf (version: VersionState): { state: ModelState, reason?: string } {
  if (serving(version)) return { state: 'READY' }
  if (version.loading) return { state: 'LOADING' }
  return { state: 'UNAVAILABLE', reason: version.loaded ? 'not ready' : version.reason }
}
