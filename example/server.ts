/**
 * A KServe V2 inference service built as a user would build one: the plugin for the shared memory
 * API, the model endpoints (server and model metadata, readiness, configuration, statistics,
 * inference) served from a model table of the example models.
 *
 *   HOST=127.0.0.1 PORT=8000 GRPC_PORT=8001 EXAMPLE_MODEL_DELAY_MS=0 EXAMPLE_REQUEST_TIMEOUT_MS=60000 npm run example:server
 *
 * ALLOW_CLIENT_SHM=false refuses client registrations, as Triton started without
 * --allow-client-shm; CLIENT_SHM_ACCESS (peer, local or any) is the plugin's clientShmAccess.
 *
 * It serves KServe V2 over HTTP on PORT and over gRPC on GRPC_PORT (Triton's ports), one registry
 * and the same models behind both, with Triton's model repository extension (index, load, unload)
 * and Triton's Prometheus metrics at /metrics, and on METRICS_PORT too (Triton's is 8002) when set.
 *
 * HTTP_SOCKET and GRPC_SOCKET serve HTTP and gRPC on these Unix domain sockets too: instead of the
 * transport's port, unless the port is given too (PORT, GRPC_PORT, --http-port, --grpc-port), then
 * beside it. The peer rule knows a client on a socket by SO_PEERCRED.
 *
 * WORKERS=4 runs it as 4 node:cluster workers on one port sharing one registry (./cluster.ts).
 * It also serves its API in a browser at /documentation (Swagger UI).
 *
 * It takes tritonserver's own options too (./server-flags.ts), each winning over its variable:
 *
 *   npm run example:server -- --http-port=8000 --model-control-mode=explicit --load-model=simple
 */
import cluster from 'node:cluster'
import { once } from 'node:events'
import net from 'node:net'
import Fastify, { type FastifyInstance, type FastifyRequest, type FastifyServerOptions } from 'fastify'
import fastifyTritonShm, {
  apiFrameworkErrors, type ClientShmAccess, DEFAULT_MAX_IN_FLIGHT_BYTES, type InferRequest, kserveErrorHandler, kserveModels, ModelTable,
  ServerLogging, tritonMetricsPlugin
} from '../lib/index'
import type { LogSettings, ModelDeclaration, ModelRepositoryOptions, RestrictionGroup, SharedRegistryOptions, TraceOptions } from '../lib/index'
import { runPrimary, workerCount } from './cluster'
import { registerDocumentation } from './documentation'
import { loadModels, type Model, run } from './models'
import { type MetricsConfig, parseServerFlags, type ServerFlags } from './server-flags'
import { version } from '../package.json'

export interface ServerOptions {
  /** Each model execution first waits this long (milliseconds). */
  modelDelayMs?: number
  /** Awaited before each model execution, once the request holds its regions: lets a test hold
   * inferences in flight, or act when one gets there. */
  beforeModel?: (request: FastifyRequest, infer: InferRequest) => Promise<void>
  /** Largest infer body accepted, in bytes (default 1 GiB). */
  bodyLimit?: number
  /** Largest JSON part of an infer body, in bytes (default 64 MiB, as Triton's). */
  jsonLimit?: number
  /** A request not received whole within this long is answered 408 and its connection closed
   * (milliseconds, default 60 000): a client trickling its body cannot hold the server forever. A
   * gRPC call is cancelled (the listener's `receiveTimeoutMs`). */
  requestTimeoutMs?: number
  /** The models to serve (default: every model of ./models). */
  models?: Map<string, Model>
  /** One registry shared by every process that opens this store (default: this process's own). */
  sharedRegistry?: SharedRegistryOptions
  /** Serve the OpenAPI document and Swagger UI at /documentation (default false). */
  documentation?: boolean
  /** Also serve KServe V2 over gRPC (Triton's port is 8001; 0: any free port), on `grpcHost`
   * (default 127.0.0.1). Default: HTTP only. */
  grpcPort?: number
  grpcHost?: string
  /** Also serve KServe V2 over gRPC on this Unix domain socket (beside `grpcPort`, if given). */
  grpcSocket?: string
  /** Also serve the metrics on this port, as Triton does on 8002 (0: any free port), on
   * `metricsHost` (default: `grpcHost`'s address). Default: at /metrics of the HTTP port only. */
  metricsPort?: number
  metricsHost?: string
  /** Serve Triton's metrics at all (default true; Triton's --allow-metrics). */
  metrics?: boolean
  /** Triton's `summary_latencies`: the metrics' summaries (default false). */
  metricsSummaries?: boolean
  /** Triton's `--metrics-config` settings (./server-flags.ts), over `metricsSummaries`. */
  metricsConfig?: MetricsConfig
  /** Triton's `--trace-config` settings (./server-flags.ts): the model table's `trace`. */
  trace?: TraceOptions
  /** With `sharedRegistry`, count statistics in this process only (default false: the whole service's). */
  processStatistics?: boolean
  /** The plugin's switch for client shared memory (default true; Triton's --allow-client-shm). */
  allowClientShm?: boolean
  /** Whose memory a client may register (the plugin's default: `peer`). */
  clientShmAccess?: ClientShmAccess
  /** What all infer requests in flight may hold together (the plugin's default, 1 GiB, or, with a
   * `jsonLimit` past 1/16 of it, enough for one JSON body of that size and its answer: 16 times it). */
  maxInFlightBytes?: number
  /** The model table's repository options: Triton's model control mode and the models loaded at
   * startup (default: explicit, every model loaded). */
  repository?: ModelRepositoryOptions
  /** The plugin's restricted shared memory API, on HTTP and gRPC (default: open). */
  restrictedApi?: { header: string, value: string }
  /** Triton's --http-restricted-api: the plugin's and the model endpoints' `restrictedApis`. */
  restrictedApis?: RestrictionGroup[]
  /** Triton's --grpc-restricted-protocol: the gRPC listener's `restrictedProtocols`. */
  restrictedProtocols?: RestrictionGroup[]
  /** Triton's --log-* flags: the logging extension's settings at startup (the rest from the
   * logger's level). The extension (`/v2/logging`, LogSettings) is always served. */
  logging?: Partial<LogSettings>
  fastify?: FastifyServerOptions
}

/** The table's declaration of an example model: Triton's backend of its platform, a run that
 * first waits `delayMs` (an ensemble has none: its steps run it), and its load and unload (a model
 * repository request's), if it has them. */
function declarationOf (model: Model, delayMs: number): ModelDeclaration {
  const { signature: { platform }, decoupled, sequenceBatching } = model
  return {
    ...model.signature,
    ...(platform === 'onnxruntime_onnx' && { backend: 'onnxruntime' }),
    ...(decoupled !== undefined && { decoupled }),
    ...(sequenceBatching !== undefined && { sequenceBatching }),
    ...model.settings,
    ...(model.execute !== undefined && { run: (infer: InferRequest) => run(model, infer, delayMs) }),
    ...(model.load !== undefined && { load: model.load }),
    ...(model.unload !== undefined && { unload: model.unload })
  } as ModelDeclaration
}

/** The metrics on a port of their own (Triton's 8002), from the app's: closed with it. */
async function listenMetrics (app: FastifyInstance, host: string, port: number): Promise<void> {
  const metricsApp = Fastify({ logger: false })
  metricsApp.get('/metrics', async (_request, reply) => reply.type(app.tritonMetrics.contentType).send(await app.tritonMetrics.metrics()))
  app.addHook('onClose', () => metricsApp.close())
  await metricsApp.listen({ host, port })
  app.log.info({ port: (metricsApp.server.address() as { port: number }).port }, 'Triton metrics listening')
}

/** What one JSON body holds in flight, in times its text: the text itself, parsed about 12 times
 * it (SECURITY.md), and its answer: an identity's output (under 1) and the output's JSON (its text
 * and the body's copy of it, under 1 each for numbers of up to about 4 characters). */
const JSON_IN_FLIGHT_MULTIPLE = 16

/** The in-flight budget: the option, else the plugin's default unless that would refuse every JSON
 * body near `jsonLimit` (Triton's --http-max-input-size raised past 1/16 of it). */
function maxInFlightBytesOf ({ maxInFlightBytes, jsonLimit }: ServerOptions): number | undefined {
  if (maxInFlightBytes !== undefined || jsonLimit === undefined) return maxInFlightBytes
  return Math.max(DEFAULT_MAX_IN_FLIGHT_BYTES, JSON_IN_FLIGHT_MULTIPLE * jsonLimit)
}

/** Triton's name: its clients' health and metadata examples check that the server says it. */
const SERVER_NAME = 'triton'

export async function buildServer (options: ServerOptions = {}): Promise<FastifyInstance> {
  const requestTimeout = options.requestTimeoutMs ?? 60_000
  const app = Fastify({
    requestTimeout,
    // Node checks request timeouts on this interval (30 s by default): check often enough to keep them.
    http: { connectionsCheckingInterval: Math.min(1000, requestTimeout), headersTimeout: requestTimeout },
    // URLs the router cannot decode (`/region/%ZZ/register`) are answered before any route: in the
    // API's shape under its paths, and in the KServe shape, the same, everywhere else.
    frameworkErrors: apiFrameworkErrors(kserveErrorHandler),
    ...options.fastify
  })
  // KServe errors are `{"error": "<message>"}`.
  app.setErrorHandler(kserveErrorHandler)
  // Triton's logging extension sets this app's own logger, on both transports.
  const logging = new ServerLogging(app.log, options.logging)
  const models = options.models ?? await loadModels()
  const maxInFlightBytes = maxInFlightBytesOf(options)
  // One table: HTTP and gRPC serve the same models, and the model repository extension.
  const table = new ModelTable([...models.values()].map((model) => declarationOf(model, options.modelDelayMs ?? 0)),
    { repository: options.repository ?? true, log: app.log, processStatistics: options.processStatistics ?? false, ...(options.trace !== undefined && { trace: options.trace }) })
  if (options.documentation === true) await registerDocumentation(app)
  await app.register(fastifyTritonShm, {
    ...(options.allowClientShm !== undefined && { allowClientShm: options.allowClientShm }),
    ...(options.clientShmAccess !== undefined && { clientShmAccess: options.clientShmAccess }),
    ...(maxInFlightBytes !== undefined && { maxInFlightBytes }),
    ...(options.restrictedApi !== undefined && { restrictedApi: options.restrictedApi }),
    ...(options.restrictedApis !== undefined && { restrictedApis: options.restrictedApis }),
    ...(options.sharedRegistry !== undefined && { sharedRegistry: options.sharedRegistry }),
    ...((options.grpcPort !== undefined || options.grpcSocket !== undefined) && {
      grpc: {
        ...(options.grpcPort !== undefined && { host: options.grpcHost, port: options.grpcPort }),
        ...(options.grpcSocket !== undefined && { path: options.grpcSocket }),
        models: table,
        server: { name: SERVER_NAME, version },
        logging,
        // A call not sent whole in time is cancelled, as an HTTP request is answered 408.
        receiveTimeoutMs: requestTimeout,
        ...(options.restrictedProtocols !== undefined && { restrictedProtocols: options.restrictedProtocols })
      }
    })
  })

  await app.register(kserveModels, {
    models: table,
    name: SERVER_NAME,
    version,
    logging,
    bodyLimit: options.bodyLimit ?? 1024 ** 3,
    jsonLimit: options.jsonLimit,
    ...(options.beforeModel !== undefined && { beforeRun: options.beforeModel }),
    ...(options.restrictedApis !== undefined && { restrictedApis: options.restrictedApis })
  })
  if (options.metrics === false) return app
  await app.register(tritonMetricsPlugin, { models: table, ...metricsPluginOptions(options) })
  if (options.metricsPort !== undefined) {
    const { metricsPort, grpcHost = '127.0.0.1', metricsHost = grpcHost } = options
    app.addHook('onReady', () => listenMetrics(app, metricsHost, metricsPort))
  }
  return app
}

/** The metrics plugin's options of `--metrics-config` and METRICS_SUMMARIES. */
function metricsPluginOptions ({ metricsSummaries = false, metricsConfig = {} }: ServerOptions) {
  const { latencyCounters = true, histograms = false, summaries = metricsSummaries, quantiles } = metricsConfig
  return { latencyCounters, histograms, summaries: summaries && quantiles !== undefined ? { quantiles } : summaries }
}

/** A true/false environment variable, `fallback` when unset: any other value stops the service,
 * as a switch read wrong ("0", "no") would silently leave it as it was. */
function envSwitch (name: string, fallback: boolean): boolean {
  const value = process.env[name]
  if (value === undefined) return fallback
  if (value === 'true' || value === 'false') return value === 'true'
  throw new Error(`${name} must be true or false, not '${value}'`)
}

/** A port from tritonserver's flag, else its environment variable; undefined if neither is set. */
const portOf = (flag: number | undefined, variable: string): number | undefined =>
  flag ?? (process.env[variable] === undefined ? undefined : Number(process.env[variable]))

/** The gRPC listener's port and socket: GRPC_SOCKET instead of the port unless one is given, beside it if one is. */
function grpcAddresses (flags: ServerFlags): Pick<ServerOptions, 'grpcPort' | 'grpcSocket'> {
  const socket = process.env.GRPC_SOCKET
  const port = portOf(flags.grpcPort, 'GRPC_PORT')
  return {
    ...(socket !== undefined && { grpcSocket: socket }),
    ...((port !== undefined || socket === undefined) && { grpcPort: port ?? 8001 })
  }
}

/** HTTP on HTTP_SOCKET instead of the port unless one is given, beside it if one is: a second
 * listener hands its connections to the app's server, whose requests then carry that socket. */
async function listenHttp (app: FastifyInstance, host: string, port: number | undefined, socket: string | undefined): Promise<void> {
  if (socket === undefined || port === undefined) {
    await app.listen(socket === undefined ? { host, port: port ?? 8000 } : { path: socket })
    return
  }
  await app.listen({ host, port })
  const beside = net.createServer((connection) => app.server.emit('connection', connection))
  beside.listen(socket)
  await once(beside, 'listening')
  // Closed (and its file removed) with the app's server.
  app.server.once('close', () => beside.close())
  app.log.info(`Server listening at ${socket}`)
}

/** The service's options from tritonserver's `flags`, each winning over its environment variable. */
function optionsOf (flags: ServerFlags): ServerOptions {
  const host = process.env.HOST ?? '127.0.0.1'
  // Set by the primary for its workers.
  const storePath = process.env.SHARED_REGISTRY_PATH
  const metricsPort = flags.metricsPort ?? (process.env.METRICS_PORT === undefined ? undefined : Number(process.env.METRICS_PORT))
  return {
    modelDelayMs: Number(process.env.EXAMPLE_MODEL_DELAY_MS ?? 0),
    requestTimeoutMs: process.env.EXAMPLE_REQUEST_TIMEOUT_MS === undefined ? undefined : Number(process.env.EXAMPLE_REQUEST_TIMEOUT_MS),
    sharedRegistry: storePath === undefined ? undefined : { path: storePath },
    documentation: true,
    grpcHost: flags.grpcHost ?? host,
    ...(flags.grpc !== false && grpcAddresses(flags)),
    ...(metricsPort !== undefined && { metricsPort }),
    metricsHost: flags.metricsHost ?? host,
    metrics: flags.metrics ?? true,
    metricsSummaries: envSwitch('METRICS_SUMMARIES', false),
    allowClientShm: flags.allowClientShm ?? envSwitch('ALLOW_CLIENT_SHM', true),
    ...(process.env.CLIENT_SHM_ACCESS !== undefined && { clientShmAccess: process.env.CLIENT_SHM_ACCESS as ClientShmAccess }),
    ...(flags.repository !== undefined && { repository: flags.repository }),
    ...(flags.jsonLimit !== undefined && { jsonLimit: flags.jsonLimit }),
    ...(flags.restrictedApis !== undefined && { restrictedApis: flags.restrictedApis }),
    ...(flags.restrictedProtocols !== undefined && { restrictedProtocols: flags.restrictedProtocols }),
    ...(flags.metricsConfig !== undefined && { metricsConfig: flags.metricsConfig }),
    ...(flags.logging !== undefined && { logging: flags.logging }),
    ...(flags.trace !== undefined && { trace: flags.trace }),
    fastify: { logger: loggerOptions(flags.logging) }
  }
}

/** pino's options for Triton's --log-file (appended to) and --log-format (ISO8601: the lines'
 * `time` as an ISO 8601 date, pino's `stdTimeFunctions.isoTime`). */
function loggerOptions ({ file, format }: Partial<LogSettings> = {}) {
  return {
    level: process.env.LOG_LEVEL ?? 'info',
    ...(file !== undefined && file !== '' && { file }),
    ...(format === 'ISO8601' && { timestamp: () => `,"time":"${new Date().toISOString()}"` })
  }
}

async function main () {
  let flags: ServerFlags
  let workers: number
  try {
    // Read by the primary before any worker starts, so a refused option is said once; each worker
    // reads the same arguments (node:cluster starts it with them) and takes the same options.
    flags = parseServerFlags(process.argv.slice(2))
    workers = workerCount(process.env.WORKERS)
  } catch (error) {
    console.error((error as Error).message)
    process.exit(1)
  }
  if (workers > 1 && cluster.isPrimary) return runPrimary(workers)
  const app = await buildServer(optionsOf(flags))
  if (flags.modelRepositories.length > 0) {
    app.log.info({ modelRepository: flags.modelRepositories }, 'the example\'s models are code: the model repository is not read')
  }
  let closing = false
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    // The first signal stops the server; every later one is ignored, never left to the default
    // action that would kill it mid-close: a stop by process group (Ctrl-C, systemd's
    // KillMode=control-group) reaches each worker and its primary, which then signals it again.
    process.on(signal, () => {
      if (closing) return
      closing = true
      app.log.info({ signal }, 'shutting down')
      app.close().then(() => process.exit(0), () => process.exit(1))
    })
  }
  if (flags.http === false) {
    // Triton's --allow-http=false: gRPC and the metrics port are served (bound once the app is ready), HTTP not.
    await app.ready()
    app.log.info('HTTP not served (--allow-http=false)')
    return
  }
  await listenHttp(app, flags.httpHost ?? process.env.HOST ?? '127.0.0.1', portOf(flags.httpPort, 'PORT'), process.env.HTTP_SOCKET)
}

if (require.main === module) {
  main().catch((error) => {
    console.error(error)
    process.exit(1)
  })
}
