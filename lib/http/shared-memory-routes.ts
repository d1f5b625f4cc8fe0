/**
 * The shared memory API over HTTP: each route decodes its request, calls the core's
 * `SharedMemoryApi` (which holds every rule) and encodes the answer. Mounted as an encapsulated
 * child, so everything set here (body parser, error shape, gates) applies to these routes only and
 * nothing of the host's settings changes their behaviour.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest, HTTPMethods, preParsingHookHandler } from 'fastify'
import type { OpenApiOptions, SystemSharedMemoryRegistry } from '../../types'
import * as errors from '../errors'
import type { ApiCaller, Memory, SharedMemoryApi } from '../registry/shared-memory-api'
import type { RestrictedFeatures } from '../util/restricted-features'
import { kserveErrorHandler } from './error-handler'
import { restrictedHook } from './restricted-hook'
import { type ApiSchemas, cudaSchemas, HIDDEN, type RouteSchema, systemSchemas } from './shared-memory-schemas'

export interface RoutesOptions {
  api: SharedMemoryApi
  /** The plugin's `restrictedApis`: the routes are the `shared-memory` category. */
  restrictions: RestrictedFeatures
  openapi: OpenApiOptions
}

/** Register bodies are a few dozen bytes; anything near this is not a register request. */
const BODY_LIMIT = 64 * 1024

const ALL_METHODS: HTTPMethods[] = ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH']

type RegionRequest = FastifyRequest<{ Params: { region_name: string } }>

/** Route config of the system register routes: their refusals are logged as refused registrations. */
interface RegisterRoute { registersSystemMemory?: true }

/** The call as the core sees it: an HTTP request, with its connection's socket (its headers were
 * checked by the routes' restrictions, before the API). */
function callerOf (request: FastifyRequest): ApiCaller {
  return { transport: 'http', connection: () => ({ socket: request.raw.socket }) }
}

/** Clients poll the status far more often than they change it: the system status is serialized
 * once per change, and sent as those bytes. */
function statusBodies (registry: SystemSharedMemoryRegistry): () => Buffer {
  let body: Buffer | undefined
  const forget = () => { body = undefined }
  registry.on('register', forget)
  registry.on('unregister', forget)
  return () => {
    registry.sync() // another process may have changed a shared registry: the events reset the cache
    return (body ??= Buffer.from(JSON.stringify(registry.status())))
  }
}

/** Bodies are kept as text: only a register request reads its body (see `parseRegisterBody`). */
function keepBodyText (_request: FastifyRequest, body: string, done: (error: null, body: string) => void) {
  done(null, body)
}

/**
 * Reads a register body as JSON, whatever its Content-Type: Triton's clients send none, or
 * text/plain. Other routes ignore their bodies, as Triton does: libcurl (Triton's C++ client,
 * perf_analyzer) sends the unregister POSTs as empty `application/x-www-form-urlencoded`.
 */
function parseRegisterBody (text: unknown): unknown {
  if (text === undefined || text === '') return undefined
  try {
    return JSON.parse(text as string)
  } catch {
    throw errors.invalidBody('the body is not valid JSON')
  }
}

/** Every response of these routes is `application/json`, empty bodies included. */
const json = (reply: FastifyReply) => reply.type('application/json')

/** Sends `value` as JSON bytes: as a Buffer, it goes out with exactly the type set (no charset
 * appended) and no serializer; the route schemas' response shapes document it. */
const sendJson = (reply: FastifyReply, value: unknown) => json(reply).send(Buffer.from(JSON.stringify(value)))

const empty = async (_request: FastifyRequest, reply: FastifyReply) => json(reply).send()

/** Answers with the body as the host's hooks (auth, rate limit) sent it: the response schemas
 * document the API, they must not filter bodies this plugin did not produce (its own are bytes). */
const sendAsJson = () => (body: unknown) => JSON.stringify(body)

/** An empty segment (`region//register`) names no region, so it is no route, whatever the method. */
const refuseEmptyRegionName: preParsingHookHandler = async (request) => {
  if ((request.params as { region_name?: string }).region_name === '') throw errors.routeNotFound()
}

/** The gates a path needs before its own: a region path refuses an empty name first. */
const pathGates = (url: string): preParsingHookHandler[] => url.includes(':region_name') ? [refuseEmptyRegionName] : []

/** Answers 405 with `Allow` for every method a path does not serve, before any body is read. */
function refuseOtherMethods (app: FastifyInstance, url: string, allowed: HTTPMethods[]) {
  const allow = allowed.includes('GET') ? [...allowed, 'HEAD'] : allowed
  const refuse = async (_request: FastifyRequest, reply: FastifyReply) => {
    reply.header('allow', allow.join(', '))
    throw errors.methodNotAllowed()
  }
  // The gate answers before the body is read (a wrong method wins over a bad or oversized body);
  // the handler is never reached.
  app.route({
    method: ALL_METHODS.filter((method) => !allow.includes(method)),
    url,
    schema: HIDDEN,
    preParsing: [...pathGates(url), refuse],
    handler: refuse
  })
}

/** The schemas as the host's OpenAPI document should show them: the configured tags and
 * operationId prefix (two registrations in one document need distinct ids), or hidden. */
function documented (schemas: ApiSchemas, { hide = false, operationIdPrefix = '' }: OpenApiOptions, tags?: string[]): ApiSchemas {
  const document = (schema: RouteSchema) =>
    ({ ...schema, hide, tags: tags ?? schema.tags, operationId: `${operationIdPrefix}${schema.operationId as string}` })
  return {
    status: document(schemas.status),
    regionStatus: document(schemas.regionStatus),
    register: document(schemas.register),
    unregister: document(schemas.unregister),
    unregisterAll: document(schemas.unregisterAll)
  }
}

function mountApi (app: FastifyInstance, api: SharedMemoryApi, memory: Memory, schemas: ApiSchemas) {
  const base = `/v2/${memory}sharedmemory`
  const statusBody = memory === 'system' ? statusBodies(api.registry) : () => Buffer.from('[]')
  /** The switch, checked before the body is read. */
  const enabled = (operation: 'register' | 'unregister'): preParsingHookHandler => async () => api.checkEnabled(memory, operation)
  // Only system registrations read their body: CUDA ones are refused whatever they send.
  const registerConfig = { ...callSpans(api, memory, 'register'), ...(memory === 'system' && { config: { registersSystemMemory: true } }) }
  const unregisterConfig = callSpans(api, memory, 'unregister')
  const routes = [
    {
      method: 'GET',
      url: '/status',
      schema: schemas.status,
      // Already JSON bytes: sent as they are, with no serializer.
      handler: async (_request: FastifyRequest, reply: FastifyReply) => json(reply).send(statusBody())
    },
    {
      method: 'GET',
      url: '/region/:region_name/status',
      schema: schemas.regionStatus,
      handler: async (request: RegionRequest, reply: FastifyReply) => sendJson(reply, api.status(memory, request.params.region_name))
    },
    {
      method: 'POST',
      url: '/region/:region_name/register',
      schema: schemas.register,
      preParsing: [enabled('register')],
      ...registerConfig,
      handler: async (request: RegionRequest, reply: FastifyReply) => {
        const fields = memory === 'system' ? parseRegisterBody(request.body) : undefined
        api.register(memory, request.params.region_name, fields, callerOf(request))
        return empty(request, reply)
      }
    },
    {
      method: 'POST',
      url: '/region/:region_name/unregister',
      schema: schemas.unregister,
      preParsing: [enabled('unregister')],
      ...unregisterConfig,
      handler: async (request: RegionRequest, reply: FastifyReply) => {
        api.unregister(memory, request.params.region_name)
        return empty(request, reply)
      }
    },
    {
      method: 'POST',
      url: '/unregister',
      schema: schemas.unregisterAll,
      preParsing: [enabled('unregister')],
      ...unregisterConfig,
      handler: async (request: FastifyRequest, reply: FastifyReply) => {
        api.unregister(memory)
        return empty(request, reply)
      }
    },
    {
      method: 'POST',
      url: '/register',
      schema: HIDDEN,
      preParsing: [enabled('register')],
      ...registerConfig,
      handler: async (request: FastifyRequest) => api.register(memory, '', undefined, callerOf(request))
    }
  ] as const
  for (const route of routes) {
    // Gates run before the body is read but after the host's route hooks (rate limit, auth),
    // which Fastify runs at onRequest: guesses at a restricted API are throttled like any request.
    const preParsing = [...pathGates(route.url), ...('preParsing' in route ? route.preParsing : [])]
    // HEAD is served whatever the server's `exposeHeadRoutes`, as the `Allow` of 405 answers says.
    const head = route.method === 'GET' ? { exposeHeadRoute: true } : {}
    app.route({ ...route, ...head, url: base + route.url, preParsing } as Parameters<FastifyInstance['route']>[0])
    refuseOtherMethods(app, base + route.url, [route.method])
  }
  // Any other path of the API is no route either, answered in the API's own error shape.
  app.route({ method: ALL_METHODS, url: `${base}/*`, schema: HIDDEN, handler: refuseUnknownPath })
}

/** The hooks that make each call of a register or unregister route a span, in the `opentelemetry`
 * trace mode (`SharedMemoryApi.span`): it begins as the request arrives (before the restricted API
 * and the switch, whose refusals it records) and ends with its response. Other routes have none. */
function callSpans (api: SharedMemoryApi, memory: Memory, operation: 'register' | 'unregister') {
  const ends = new WeakMap<FastifyRequest, (error?: unknown) => void>()
  const end = (request: FastifyRequest, error?: unknown) => {
    ends.get(request)?.(error)
    ends.delete(request)
  }
  return {
    onRequest: async (request: FastifyRequest) => {
      const ending = api.span(memory, operation, (request.params as { region_name?: string }).region_name, () => request.headers)
      if (ending !== undefined) ends.set(request, ending)
    },
    onError: async (request: FastifyRequest, _reply: FastifyReply, error: unknown) => end(request, error),
    onResponse: async (request: FastifyRequest) => end(request)
  }
}

/** A region path the router did not match although it has a name: the name is longer than the
 * router's `maxParamLength` allows (Fastify's server option, 100 by default). */
const REGION_PATH = /^region\/[^/]+\/(status|register|unregister)$/

async function refuseUnknownPath (request: FastifyRequest<{ Params: { '*': string } }>) {
  throw REGION_PATH.test(request.params['*']) ? errors.regionNameTooLong() : errors.routeNotFound()
}

export async function sharedMemoryRoutes (app: FastifyInstance, { api, restrictions, openapi }: RoutesOptions) {
  // The routes check what they read themselves (the core's rules): the schemas document them.
  app.setValidatorCompiler(() => () => true)
  app.setSerializerCompiler(sendAsJson)
  app.setErrorHandler((error: Error, request: FastifyRequest, reply: FastifyReply) => {
    if ((request.routeOptions.config as RegisterRoute).registersSystemMemory === true) {
      api.logRefusedRegister((request as RegionRequest).params.region_name, error)
    }
    return kserveErrorHandler(error, request, reply)
  })
  // Whatever the Content-Type (clients send none, text/plain, or a form type), bodies arrive as text.
  app.removeAllContentTypeParsers()
  app.addContentTypeParser('*', { parseAs: 'string', bodyLimit: BODY_LIMIT }, keepBodyText)
  // The restricted API before every other gate, yet after the host's route hooks (see mountApi).
  app.addHook('preParsing', restrictedHook(restrictions, () => 'shared-memory'))
  mountApi(app, api, 'system', documented(systemSchemas, openapi, openapi.systemTags))
  mountApi(app, api, 'cuda', documented(cudaSchemas, openapi, openapi.cudaTags))
}
