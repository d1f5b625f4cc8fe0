/**
 * HTTP <-> registry. Mounted as an encapsulated child, so everything set here (validator, body
 * parser, error shape, access hooks) applies to these routes only and nothing of the host's
 * settings changes their behaviour.
 */
import { timingSafeEqual } from 'node:crypto'
import Ajv from 'ajv'
import type {
  FastifyInstance, FastifyReply, FastifyRequest, FastifySchema, HTTPMethods, onRequestHookHandler
} from 'fastify'
import type { RegisterRequestBody, SharedMemoryRegionStatus, SystemSharedMemoryRegistry } from '../types'
import * as errors from './errors'
import { SharedMemoryError } from './errors'
import { type ApiSchemas, cudaSchemas, systemSchemas } from './schemas'
import { formatValidationError } from './validation-errors'

export interface RoutesOptions {
  registry: SystemSharedMemoryRegistry
  allowClientShm: boolean
  restrictedApi?: { header: string, value: string }
}

/** The operations behind one family of routes (system or CUDA shared memory). */
interface SharedMemoryApi {
  status(): SharedMemoryRegionStatus[]
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

function systemApi (registry: SystemSharedMemoryRegistry): SharedMemoryApi {
  return {
    status: () => registry.status(),
    regionStatus: (name) => registry.status(name),
    register: (name, body) => registry.register(name, { key: body.key, offset: body.offset, byteSize: body.byte_size }),
    unregister: (name) => registry.unregister(name),
    unregisterAll: () => registry.unregisterAll()
  }
}

/** A server without GPUs, as Triton answers: clients that clean up CUDA regions must not fail. */
const cudaApi: SharedMemoryApi = {
  status: () => [],
  regionStatus: (name) => { throw errors.cudaRegionStatusNotFound(name) },
  register: (name) => { throw errors.cudaNotSupported(name) },
  unregister: () => {},
  unregisterAll: () => {}
}

function parseJsonBody (_request: FastifyRequest, body: string, done: (error: Error | null, body?: unknown) => void) {
  try {
    done(null, JSON.parse(body))
  } catch {
    done(errors.invalidBody('the body is not valid JSON'))
  }
}

function sendError (error: Error & { statusCode?: number }, request: FastifyRequest, reply: FastifyReply) {
  if (error instanceof SharedMemoryError) {
    return reply.code(error.statusCode).send({ error: error.message })
  }
  // Fastify's own client errors (body too large, bad Content-Length...) name no internals.
  if (error.statusCode !== undefined && error.statusCode >= 400 && error.statusCode < 500) {
    return reply.code(error.statusCode).send({ error: error.message })
  }
  request.log.error({ err: error }, 'shared memory API failed')
  return reply.code(500).send({ error: 'Internal Server Error' })
}

function headerGate ({ header, value }: { header: string, value: string }): onRequestHookHandler {
  const expected = Buffer.from(value)
  return async (request) => {
    const received = Buffer.from(String(request.headers[header.toLowerCase()] ?? ''))
    const matches = received.length === expected.length && timingSafeEqual(received, expected)
    if (!matches) throw errors.restrictedApi(header)
  }
}

/** The name in the path; an empty segment (`region//register`) names no region and no route. */
function regionName (request: RegionRequest): string {
  const name = request.params.region_name
  if (name === '') throw errors.routeNotFound()
  return name
}

/** Answers 405 with `Allow` for every method a path does not serve. */
function refuseOtherMethods (app: FastifyInstance, url: string, allowed: HTTPMethods[]) {
  const allow = allowed.includes('GET') ? [...allowed, 'HEAD'] : allowed
  app.route({
    method: ALL_METHODS.filter((method) => !allow.includes(method)),
    url,
    schema: HIDDEN,
    handler: async (_request, reply) => {
      reply.header('allow', allow.join(', '))
      throw errors.methodNotAllowed()
    }
  })
}

function mountApi (app: FastifyInstance, base: string, api: SharedMemoryApi, schemas: ApiSchemas,
  registerGate: onRequestHookHandler) {
  const empty = async (_request: FastifyRequest, reply: FastifyReply) => reply.send()
  const routes = [
    { method: 'GET', url: '/status', schema: schemas.status, handler: async () => api.status() },
    {
      method: 'GET',
      url: '/region/:region_name/status',
      schema: schemas.regionStatus,
      handler: async (request: RegionRequest) => api.regionStatus(regionName(request))
    },
    {
      method: 'POST',
      url: '/region/:region_name/register',
      schema: schemas.register,
      onRequest: registerGate,
      handler: async (request: RegionRequest, reply: FastifyReply) => {
        api.register(regionName(request), request.body)
        return empty(request, reply)
      }
    },
    {
      method: 'POST',
      url: '/region/:region_name/unregister',
      schema: schemas.unregister,
      handler: async (request: RegionRequest, reply: FastifyReply) => {
        api.unregister(regionName(request))
        return empty(request, reply)
      }
    },
    {
      method: 'POST',
      url: '/unregister',
      schema: schemas.unregisterAll,
      handler: async (request: FastifyRequest, reply: FastifyReply) => {
        api.unregisterAll()
        return empty(request, reply)
      }
    },
    {
      method: 'POST',
      url: '/register',
      schema: HIDDEN,
      onRequest: registerGate,
      handler: async () => { throw errors.missingRegionName() }
    }
  ] as const
  for (const route of routes) {
    app.route({ ...route, url: base + route.url } as Parameters<FastifyInstance['route']>[0])
    refuseOtherMethods(app, base + route.url, [route.method])
  }
}

export async function routes (app: FastifyInstance, options: RoutesOptions) {
  const ajv = new Ajv({ coerceTypes: false, useDefaults: false, removeAdditional: false })
  app.setValidatorCompiler(({ schema }) => ajv.compile(schema))
  app.setSchemaErrorFormatter(formatValidationError)
  app.setErrorHandler(sendError)
  // Clients send these bodies with no Content-Type, or text/plain: every body is read as JSON.
  app.removeAllContentTypeParsers()
  app.addContentTypeParser('*', { parseAs: 'string', bodyLimit: BODY_LIMIT }, parseJsonBody)
  app.addHook('onSend', async (_request, reply, payload) => {
    reply.type('application/json')
    return payload
  })
  if (options.restrictedApi !== undefined) app.addHook('onRequest', headerGate(options.restrictedApi))

  const registerGate: onRequestHookHandler = async () => {
    if (!options.allowClientShm) throw errors.clientShmDisabled()
  }
  mountApi(app, '/v2/systemsharedmemory', systemApi(options.registry), systemSchemas, registerGate)
  mountApi(app, '/v2/cudasharedmemory', cudaApi, cudaSchemas, registerGate)
}
