/**
 * The KServe V2 server, health and model endpoints, served from a model table: what Triton's
 * clients and perf_analyzer call besides the shared memory API. An encapsulated plugin (register
 * it after fastify-triton-shm, with a `prefix` if wanted): its body parser, serializer and error
 * shape apply to its routes only.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest, RouteHandlerMethod } from 'fastify'
import fp from 'fastify-plugin'
import type { RestrictedCategory, SystemSharedMemoryRegistry } from '../../types'
import * as errors from '../errors'
import { serverMetadata } from '../models/server-metadata'
import { kserveErrorHandler } from './error-handler'
import { DEFAULT_JSON_LIMIT } from '../kserve/infer-limits'
import { generate, type GenerateOptions, generateStream } from './generate-exchange'
import { useInferBodyParser } from './infer-body'
import { JSON_BODY_CONFIG } from './json-body-route'
import { inferResponse, readInferRequest } from './infer-exchange'
import { loggingRoutes } from './logging-routes'
import { type ModelRoute, modelSchemas } from './model-schemas'
import { checkModelsOptions, type KServeModelsOptions, MODELS_PLUGIN } from './models-options'
import { repositoryRoutes } from './repository-routes'
import { restrictedHook } from './restricted-hook'
import { traceRoutes } from './trace-routes'
import { httpTrace, traceReply } from './traced-reply'

type ModelRequest = FastifyRequest<{ Params: { model: string, version?: string } }>
type ModelHandler = (request: ModelRequest, reply: FastifyReply) => Promise<unknown>

/** Health and readiness answer with their status and no body, as Triton does. */
const empty = (reply: FastifyReply, ready: boolean) => reply.code(ready ? 200 : 400).send()

async function models (app: FastifyInstance, options: KServeModelsOptions) {
  const { models: table, name, version, decorator, bodyLimit, jsonLimit, limits, beforeRun, openapi, restrictions, logging } = checkModelsOptions(options)
  if (!app.hasDecorator(decorator)) throw errors.noRegistry(MODELS_PLUGIN, decorator)
  const registry = (app as unknown as Record<string, SystemSharedMemoryRegistry>)[decorator]
  // With a shared registry, statistics and the repository's state are the whole service's.
  table.serveWith(registry)
  logging?.serveWith(registry)
  const schemas = modelSchemas(openapi)
  app.setErrorHandler(kserveErrorHandler)
  // The schemas document the routes; they check nothing (the table resolves names and versions,
  // readInferRequest reads bodies), so no validator runs per request, and no response schema
  // filters the bodies, which are this plugin's own JSON.
  app.setValidatorCompiler(() => () => true)
  app.setSerializerCompiler(() => (body: unknown) => JSON.stringify(body))
  useInferBodyParser(app, { bodyLimit, jsonLimit, inFlight: registry.inFlight })
  // What sequences hold (a model's state, leases it kept) is let go with the server.
  app.addHook('onClose', async () => {
    table.endSequences()
    await table.closeTraces()
  })

  const route = (url: string, of: ModelRoute, category: RestrictedCategory, handler: ModelHandler, method: 'GET' | 'POST' = 'GET') =>
    app.route({
      method,
      url,
      schema: schemas[of][url.includes(':version') ? 'modelVersion' : 'model'],
      ...(restrictions.isRestricted(category) && { preParsing: restrictedHook(restrictions, () => category) }),
      handler: handler as RouteHandlerMethod
    })
  const metadata = serverMetadata(name, version, { repository: table.servesRepository, logging: logging !== undefined })
  route('/v2', 'serverMetadata', 'metadata', async () => metadata)
  route('/v2/health/live', 'serverLive', 'health', async (_request, reply) => empty(reply, true))
  route('/v2/health/ready', 'serverReady', 'health', async (_request, reply) => empty(reply, table.isReady()))
  route('/v2/models/stats', 'allModelStatistics', 'statistics', async () => table.statistics())

  const infer = async (request: ModelRequest, reply: FastifyReply) => {
    const { model, version } = request.params
    const trace = httpTrace(reply)
    let responded = false
    try {
      const response = await table.infer(model, version, {
        read: (signature, modelVersion) => readInferRequest(request, reply, { registry, model: signature, modelVersion, limits }),
        ...(beforeRun !== undefined && { beforeRun: (inferRequest) => beforeRun(request, inferRequest) }),
        respond: (inferRequest) => inferResponse(inferRequest, reply),
        traceCarrier: () => request.headers,
        traced: (taken) => trace.take(taken)
      })
      responded = true
      return response
    } finally {
      traceReply(trace, responded, reply)
    }
  }
  const generateOptions: GenerateOptions = { registry, limits, maxInputBytes: jsonLimit ?? DEFAULT_JSON_LIMIT, ...(beforeRun !== undefined && { beforeRun }) }
  const generateRoute = (url: string, of: ModelRoute, handler: ModelHandler) =>
    app.route({
      method: 'POST',
      url,
      schema: schemas[of][url.includes(':version') ? 'modelVersion' : 'model'],
      config: JSON_BODY_CONFIG,
      ...(restrictions.isRestricted('inference') && { preParsing: restrictedHook(restrictions, () => 'inference') }),
      handler: handler as RouteHandlerMethod
    })
  for (const base of ['/v2/models/:model', '/v2/models/:model/versions/:version']) {
    route(base, 'modelMetadata', 'metadata', async ({ params }: ModelRequest) => table.metadata(params.model, params.version))
    route(`${base}/ready`, 'modelReady', 'health', async ({ params }: ModelRequest, reply) => empty(reply, table.isModelReady(params.model, params.version)))
    route(`${base}/config`, 'modelConfig', 'model-config', async ({ params }: ModelRequest) => table.config(params.model, params.version))
    route(`${base}/stats`, 'modelStatistics', 'statistics', async ({ params }: ModelRequest) => table.statistics(params.model, params.version))
    route(`${base}/infer`, 'modelInfer', 'inference', infer, 'POST')
    generateRoute(`${base}/generate`, 'modelGenerate', async (request, reply) => generate(table, request, reply, generateOptions))
    generateRoute(`${base}/generate_stream`, 'modelGenerateStream', async (request, reply) => generateStream(table, request, reply, generateOptions))
  }
  if (table.servesRepository) await app.register(repositoryRoutes, { models: table, bodyLimit, openapi, restrictions })
  if (logging !== undefined) await app.register(loggingRoutes, { logging, openapi, restrictions })
  await app.register(traceRoutes, { models: table, openapi, restrictions })
}

/**
 * `GET /v2`, `/v2/health/{live,ready}`, `/v2/models/stats`, Triton's trace settings
 * (`/v2/trace/setting`, `/v2/models/<m>/trace/setting`) and, at `/v2/models/<m>` and
 * `/v2/models/<m>/versions/<v>`: metadata, `/ready`, `/config`, `/stats`, `POST /infer` and
 * (Triton's generate extension) `POST /generate` and `/generate_stream`, every answer from
 * `options.models`. Errors are `{"error": <message>}` with Triton's texts.
 */
export const kserveModels = fp(models, { fastify: '5.x', name: 'fastify-triton-shm-models', encapsulate: true })
