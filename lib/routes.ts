/**
 * HTTP <-> registry. Mounted as an encapsulated child, so everything set here (validator, body
 * parser, error shape, access hooks) applies to these routes only and nothing of the host's
 * settings changes their behaviour.
 */
import Ajv from 'ajv'
import type {
  FastifyInstance, FastifyReply, FastifyRequest, FastifySchema, HTTPMethods, preParsingHookHandler,
  preValidationHookHandler
} from 'fastify'
import type { OpenApiOptions, RegisterRequestBody, SharedMemoryRegionStatus, SystemSharedMemoryRegistry } from '../types'
import * as errors from './errors'
import { kserveErrorHandler } from './kserve/error-handler'
import { carriesSecret } from './restricted-api'
import { type ApiSchemas, cudaSchemas, type RouteSchema, systemSchemas } from './schemas'
import { formatValidationError } from './validation-errors'

export interface RoutesOptions {
  registry: SystemSharedMemoryRegistry
  allowClientShm: boolean
  restrictedApi?: { header: string, value: string }
  openapi: OpenApiOptions
}

/** The operations behind one family of routes (system or CUDA shared memory). */
interface SharedMemoryApi {
  kind: 'system' | 'cuda'
  /** The status of every region as the JSON bytes to send. */
  statusBody(): Buffer
  regionStatus(name: string): SharedMemoryRegionStatus[]
  register(name: string, body: RegisterRequestBody): void
  unregister(name: string): void
  unregisterAll(): void
}

/** Register bodies are a few dozen bytes; anything near this is not a register request. */
const BODY_LIMIT = 64 * 1024

const ALL_METHODS: HTTPMethods[] = ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH']

/** Left out of a host's OpenAPI document (understood by @fastify/swagger). */
const HIDDEN = { hide: true } as FastifySchema

type RegionRequest = FastifyRequest<{ Params: { region_name: string }, Body: RegisterRequestBody }>

/** Set on a register request once it reaches the registry, which logs its own refusals. */
const kReachedRegistry = Symbol('reached the registry')
type RegisterRequest = RegionRequest & { [kReachedRegistry]?: true }

/** Route config of the system register route: refusals before the registry are logged here. */
interface RefusalLogging { logRefusals?: true }

function systemApi (registry: SystemSharedMemoryRegistry): SharedMemoryApi {
  // Clients poll the status far more often than they change it: it is serialized once per change.
  let statusBody: Buffer | undefined
  const forgetStatus = () => { statusBody = undefined }
  registry.on('register', forgetStatus)
  registry.on('unregister', forgetStatus)
  return {
    kind: 'system',
    statusBody: () => {
      registry.sync() // another process may have changed a shared registry: the events reset the cache
      return (statusBody ??= Buffer.from(JSON.stringify(registry.status())))
    },
    regionStatus: (name) => registry.status(name),
    register: (name, body) => registry.register(name, { key: body.key, offset: body.offset, byteSize: body.byte_size }),
    unregister: (name) => registry.unregister(name),
    unregisterAll: () => registry.unregisterAll()
  }
}

const EMPTY_LIST = Buffer.from('[]')

/** A server without GPUs, as Triton answers: clients that clean up CUDA regions must not fail. */
const cudaApi: SharedMemoryApi = {
  kind: 'cuda',
  statusBody: () => EMPTY_LIST,
  regionStatus: (name) => { throw errors.cudaRegionStatusNotFound(name) },
  register: (name) => { throw errors.cudaNotSupported(name) },
  unregister: () => {},
  unregisterAll: () => {}
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
const parseRegisterBody: preValidationHookHandler = async (request) => {
  const text = request.body as string | undefined
  if (text === undefined || text === '') return
  try {
    request.body = JSON.parse(text)
  } catch {
    throw errors.invalidBody('the body is not valid JSON')
  }
}

/** Every response of these routes is `application/json`, empty bodies included. */
const json = (reply: FastifyReply) => reply.type('application/json')

/** Sends `value` as JSON bytes: as a Buffer, it goes out with exactly the type set (no charset
 * appended) and no serializer; the route schemas' response shapes document it. */
const sendJson = (reply: FastifyReply, value: unknown) => json(reply).send(Buffer.from(JSON.stringify(value)))

/** A register request refused before the registry saw it (body, disabled, restricted): logged as
 * the registry logs its own refusals, at debug with the region and the reason. */
function logEarlyRefusal (request: RegisterRequest, reason: string) {
  if ((request.routeOptions.config as RefusalLogging).logRefusals !== true || request[kReachedRegistry]) return
  request.log.debug({ region: request.params.region_name, reason }, 'refused to register system shared memory region')
}

/** Every error in the API's shape, its status kept: ours, Fastify's (body too large...), or a host
 * plugin's (rate limit, under-pressure); only an error without a status is a hidden, logged 500. */
function sendError (error: Error & { statusCode?: number }, request: FastifyRequest, reply: FastifyReply) {
  logEarlyRefusal(request as RegisterRequest, error.message)
  return kserveErrorHandler(error, request, reply)
}

/** Answers with the body as the host's hooks (auth, rate limit) sent it: the response schemas
 * document the API, they must not filter bodies this plugin did not produce (its own are bytes). */
const sendAsJson = () => (body: unknown) => JSON.stringify(body)

function headerGate ({ header, value }: { header: string, value: string }): preParsingHookHandler {
  const expected = Buffer.from(value)
  return async (request) => {
    const sent = request.headers[header.toLowerCase()]
    if (!carriesSecret(sent === undefined ? undefined : String(sent), expected)) throw errors.restrictedApi(header)
  }
}

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

function mountApi (app: FastifyInstance, base: string, api: SharedMemoryApi, schemas: ApiSchemas,
  clientShmGate: preParsingHookHandler) {
  // Triton's switch refuses system unregister too; a server without GPUs answers CUDA unregister
  // whatever it says (Triton's example client stops if it fails).
  const unregisterGate = api.kind === 'system' ? [clientShmGate] : []
  const empty = async (_request: FastifyRequest, reply: FastifyReply) => json(reply).send()
  const routes = [
    {
      method: 'GET',
      url: '/status',
      schema: schemas.status,
      // Already JSON bytes: sent as they are, with no serializer.
      handler: async (_request: FastifyRequest, reply: FastifyReply) => json(reply).send(api.statusBody())
    },
    {
      method: 'GET',
      url: '/region/:region_name/status',
      schema: schemas.regionStatus,
      handler: async (request: RegionRequest, reply: FastifyReply) => sendJson(reply, api.regionStatus(request.params.region_name))
    },
    {
      method: 'POST',
      url: '/region/:region_name/register',
      schema: schemas.register,
      preParsing: [clientShmGate],
      // CUDA registrations are refused whatever they send: only system registrations read their
      // body, and log the refusals that come before the registry.
      ...(api.kind === 'system' && { preValidation: parseRegisterBody, config: { logRefusals: true } }),
      handler: async (request: RegisterRequest, reply: FastifyReply) => {
        request[kReachedRegistry] = true
        api.register(request.params.region_name, request.body)
        return empty(request, reply)
      }
    },
    {
      method: 'POST',
      url: '/region/:region_name/unregister',
      schema: schemas.unregister,
      preParsing: unregisterGate,
      handler: async (request: RegionRequest, reply: FastifyReply) => {
        api.unregister(request.params.region_name)
        return empty(request, reply)
      }
    },
    {
      method: 'POST',
      url: '/unregister',
      schema: schemas.unregisterAll,
      preParsing: unregisterGate,
      handler: async (request: FastifyRequest, reply: FastifyReply) => {
        api.unregisterAll()
        return empty(request, reply)
      }
    },
    {
      method: 'POST',
      url: '/register',
      schema: HIDDEN,
      preParsing: [clientShmGate],
      handler: async () => { throw errors.missingRegionName(api.kind) }
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

/** A region path the router did not match although it has a name: the name is longer than the
 * router's `maxParamLength` allows (Fastify's server option, 100 by default). */
const REGION_PATH = /^region\/[^/]+\/(status|register|unregister)$/

async function refuseUnknownPath (request: FastifyRequest<{ Params: { '*': string } }>) {
  throw REGION_PATH.test(request.params['*']) ? errors.regionNameTooLong() : errors.routeNotFound()
}

export async function routes (app: FastifyInstance, options: RoutesOptions) {
  const ajv = new Ajv({ coerceTypes: false, useDefaults: false, removeAdditional: false })
  app.setValidatorCompiler(({ schema }) => ajv.compile(schema))
  app.setSchemaErrorFormatter(formatValidationError)
  app.setErrorHandler(sendError)
  app.setSerializerCompiler(sendAsJson)
  // Whatever the Content-Type (clients send none, text/plain, or a form type), bodies arrive as text.
  app.removeAllContentTypeParsers()
  app.addContentTypeParser('*', { parseAs: 'string', bodyLimit: BODY_LIMIT }, keepBodyText)
  // Before every other gate, yet after the host's route hooks (see mountApi).
  if (options.restrictedApi !== undefined) app.addHook('preParsing', headerGate(options.restrictedApi))

  const clientShmGate: preParsingHookHandler = async () => {
    if (!options.allowClientShm) throw errors.clientShmDisabled()
  }
  const { openapi } = options
  mountApi(app, '/v2/systemsharedmemory', systemApi(options.registry), documented(systemSchemas, openapi, openapi.systemTags), clientShmGate)
  mountApi(app, '/v2/cudasharedmemory', cudaApi, documented(cudaSchemas, openapi, openapi.cudaTags), clientShmGate)
}
