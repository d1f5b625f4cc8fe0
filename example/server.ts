/**
 * A KServe V2 inference service built as a user would build one: the plugin for the shared memory
 * API, the KServe helpers for the infer route, and the example models.
 *
 *   HOST=127.0.0.1 PORT=8000 GRPC_PORT=8001 EXAMPLE_MODEL_DELAY_MS=0 EXAMPLE_REQUEST_TIMEOUT_MS=60000 npm run example:server
 *
 * It serves KServe V2 over HTTP on PORT and over gRPC on GRPC_PORT (Triton's ports), one registry
 * and the same models behind both.
 *
 * WORKERS=4 runs it as 4 node:cluster workers on one port sharing one registry (./cluster.ts).
 * It also serves its API in a browser at /documentation (Swagger UI).
 */
import cluster from 'node:cluster'
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest, type FastifyServerOptions } from 'fastify'
import fastifyTritonShm, {
  apiFrameworkErrors, type InferRequest, kserveErrorHandler, ModelTable, readInferRequest, useInferBodyParser
} from '../lib/index'
import type { SharedRegistryOptions } from '../types'
import { runPrimary, workerCount } from './cluster'
import { kserveDoc, registerDocumentation } from './documentation'
import { loadModels, type Model, run } from './models'
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
   * (milliseconds, default 60 000): a client trickling its body cannot hold the server forever. */
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
  fastify?: FastifyServerOptions
}

interface ModelParams { model: string, version?: string }

class ClientError extends Error {
  constructor (readonly statusCode: number, message: string) {
    super(message)
  }
}

/** The model a path names, at the version it names (if any), answered as Triton answers. */
function modelOf (models: Map<string, Model>, request: FastifyRequest<{ Params: ModelParams }>): Model {
  const { model: name, version } = request.params
  const model = models.get(name)
  if (model === undefined) throw new ClientError(404, `Request for unknown model: '${name}' is not found`)
  if (version === undefined || model.signature.versions?.includes(version) === true) return model
  if (!/^\d+$/.test(version)) throw new ClientError(400, `Invalid model version: '${version}' is not a number`)
  throw new ClientError(404, `Request for unknown model: '${name}' version ${version} is not found`)
}

/** The KServe model metadata: the signature without what only the helpers read. */
function metadataOf ({ signature }: Model) {
  const { name, versions, platform, inputs, outputs } = signature
  return { name, versions, platform, inputs, outputs }
}

const SERVER_NAME = 'fastify-triton-shm-example'

/** The models as the gRPC listener serves them: each declared once, run as the HTTP route runs it. */
const modelTable = (models: Map<string, Model>, delayMs: number) =>
  new ModelTable([...models.values()].map((model) => ({ ...model.signature, run: (infer: InferRequest) => run(model, infer, delayMs) })))

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
  const models = options.models ?? await loadModels()
  if (options.documentation === true) await registerDocumentation(app)
  await app.register(fastifyTritonShm, {
    ...(options.sharedRegistry !== undefined && { sharedRegistry: options.sharedRegistry }),
    ...(options.grpcPort !== undefined && {
      grpc: { host: options.grpcHost, port: options.grpcPort, models: modelTable(models, options.modelDelayMs ?? 0), server: { name: SERVER_NAME, version } }
    })
  })

  app.get('/v2', kserveDoc('serverMetadata', 'Server metadata'), async () => ({
    name: SERVER_NAME,
    version,
    extensions: ['binary_tensor_data', 'system_shared_memory']
  }))
  app.get('/v2/health/live', kserveDoc('serverLive', 'Server liveness'), async (_request, reply) => reply.send())
  app.get('/v2/health/ready', kserveDoc('serverReady', 'Server readiness'), async (_request, reply) => reply.send())
  for (const [base, of] of [['/v2/models/:model', 'model'], ['/v2/models/:model/versions/:version', 'modelVersion']]) {
    app.get<{ Params: ModelParams }>(base, kserveDoc(`${of}Metadata`, 'Model metadata'), async (request) => metadataOf(modelOf(models, request)))
    app.get<{ Params: ModelParams }>(`${base}/ready`, kserveDoc(`${of}Ready`, 'Model readiness'), async (request, reply) => {
      modelOf(models, request)
      return reply.send()
    })
  }

  await app.register(async (inference) => {
    useInferBodyParser(inference, { bodyLimit: options.bodyLimit ?? 1024 ** 3, jsonLimit: options.jsonLimit })
    const infer = async (request: FastifyRequest<{ Params: ModelParams }>, reply: FastifyReply) => {
      const model = modelOf(models, request)
      const inferRequest = readInferRequest(request, reply, { registry: app.systemSharedMemory, model: model.signature })
      await options.beforeModel?.(request, inferRequest)
      await run(model, inferRequest, options.modelDelayMs ?? 0)
      return inferRequest.respond(reply)
    }
    inference.post('/v2/models/:model/infer', kserveDoc('modelInfer', 'Inference'), infer)
    inference.post('/v2/models/:model/versions/:version/infer', kserveDoc('modelVersionInfer', 'Inference'), infer)
  })
  return app
}

async function main () {
  let workers: number
  try {
    workers = workerCount(process.env.WORKERS)
  } catch (error) {
    console.error((error as Error).message)
    process.exit(1)
  }
  if (workers > 1 && cluster.isPrimary) return runPrimary(workers)
  // Set by the primary for its workers.
  const storePath = process.env.SHARED_REGISTRY_PATH
  const app = await buildServer({
    modelDelayMs: Number(process.env.EXAMPLE_MODEL_DELAY_MS ?? 0),
    requestTimeoutMs: process.env.EXAMPLE_REQUEST_TIMEOUT_MS === undefined ? undefined : Number(process.env.EXAMPLE_REQUEST_TIMEOUT_MS),
    sharedRegistry: storePath === undefined ? undefined : { path: storePath },
    documentation: true,
    grpcHost: process.env.HOST ?? '127.0.0.1',
    grpcPort: Number(process.env.GRPC_PORT ?? 8001),
    fastify: { logger: { level: process.env.LOG_LEVEL ?? 'info' } }
  })
  let closing = false
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    // Once per signal: a Ctrl-C reaches a worker and its primary, which then sends SIGTERM too.
    process.once(signal, () => {
      if (closing) return
      closing = true
      app.log.info({ signal }, 'shutting down')
      app.close().then(() => process.exit(0), () => process.exit(1))
    })
  }
  await app.listen({ host: process.env.HOST ?? '127.0.0.1', port: Number(process.env.PORT ?? 8000) })
}

if (require.main === module) {
  main().catch((error) => {
    console.error(error)
    process.exit(1)
  })
}
