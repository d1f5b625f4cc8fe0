/**
 * A KServe V2 inference service built as a user would build one: the plugin for the shared memory
 * API, the KServe helpers for the infer route, and the example models.
 *
 *   HOST=127.0.0.1 PORT=8000 EXAMPLE_MODEL_DELAY_MS=0 npm run example:server
 */
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest, type FastifyServerOptions } from 'fastify'
import fastifyTritonShm, { kserveErrorHandler, readInferRequest, useInferBodyParser } from '../lib/index'
import { type Model, models, run } from './models'
import { version } from '../package.json'

export interface ServerOptions {
  /** Each model execution first waits this long (milliseconds). */
  modelDelayMs?: number
  /** Largest infer body accepted, in bytes. */
  bodyLimit?: number
  fastify?: FastifyServerOptions
}

interface ModelParams { model: string }

class NotFound extends Error {
  readonly statusCode = 404
}

function modelOf (request: FastifyRequest<{ Params: ModelParams }>): Model {
  const model = models.get(request.params.model)
  if (model === undefined) throw new NotFound(`Request for unknown model: '${request.params.model}' is not found`)
  return model
}

export async function buildServer (options: ServerOptions = {}): Promise<FastifyInstance> {
  const app = Fastify(options.fastify)
  // KServe errors are `{"error": "<message>"}`.
  app.setErrorHandler(kserveErrorHandler)
  await app.register(fastifyTritonShm)

  app.get('/v2', async () => ({
    name: 'fastify-triton-shm-example',
    version,
    extensions: ['binary_tensor_data', 'system_shared_memory']
  }))
  app.get('/v2/health/live', async (_request, reply) => reply.send())
  app.get('/v2/health/ready', async (_request, reply) => reply.send())
  for (const base of ['/v2/models/:model', '/v2/models/:model/versions/:version']) {
    app.get<{ Params: ModelParams }>(base, async (request) => modelOf(request).signature)
    app.get<{ Params: ModelParams }>(`${base}/ready`, async (request, reply) => {
      modelOf(request)
      return reply.send()
    })
  }

  await app.register(async (inference) => {
    useInferBodyParser(inference, { bodyLimit: options.bodyLimit ?? 1024 ** 3 })
    const infer = async (request: FastifyRequest<{ Params: ModelParams }>, reply: FastifyReply) => {
      const model = modelOf(request)
      const inferRequest = readInferRequest(request, reply, { registry: app.systemSharedMemory, model: model.signature })
      await run(model, inferRequest, options.modelDelayMs ?? 0)
      return inferRequest.respond(reply)
    }
    inference.post('/v2/models/:model/infer', infer)
    inference.post('/v2/models/:model/versions/:version/infer', infer)
  })
  return app
}

async function main () {
  const app = await buildServer({
    modelDelayMs: Number(process.env.EXAMPLE_MODEL_DELAY_MS ?? 0),
    fastify: { logger: { level: process.env.LOG_LEVEL ?? 'info' } }
  })
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
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
