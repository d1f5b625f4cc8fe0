/**
 * Triton's model repository extension over HTTP, from the model table: `POST /v2/repository/index`
 * (body `{"ready": boolean}`, optional), `POST /v2/repository/models/<m>/load` (body
 * `{"parameters": {"config": string, "file:<version>/<name>": base64}}`, optional) and
 * `.../unload` (body `{"parameters": {"unload_dependents": boolean}}`, optional). Bodies are read
 * whatever their Content-Type (Triton's clients send none); answers are Triton's: the index as a
 * JSON array, load and unload an empty 200.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { ModelLoadOverrides } from '../../types/models'
import * as errors from '../errors'
import type { ModelTable } from '../models/model-table'
import type { RestrictedFeatures } from '../util/restricted-features'
import { repositorySchemas } from './repository-schemas'
import type { KServeModelsOpenApiOptions } from './models-options'
import { restrictedHook } from './restricted-hook'

type JsonObject = Record<string, unknown>

const isObject = (value: unknown): value is JsonObject => typeof value === 'object' && value !== null && !Array.isArray(value)

/** Any body is JSON, whatever its Content-Type; an empty one has no fields. */
function parseBody (_request: FastifyRequest, body: Buffer, done: (error: Error | null, body?: unknown) => void): void {
  if (body.length === 0) return done(null, {})
  try {
    done(null, JSON.parse(body.toString()))
  } catch (error) {
    done(errors.invalidRepositoryRequest((error as Error).message))
  }
}

/** The body's fields: none without a body; anything but a JSON object is refused. */
function bodyOf ({ body }: FastifyRequest): JsonObject {
  if (body === undefined) return {}
  if (!isObject(body)) throw errors.invalidRepositoryRequest('the body must be a JSON object')
  return body
}

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/

/** A load's parameters: `config` a string, `file:...` base64 strings; nothing else. */
function loadOverrides (parameters: unknown): ModelLoadOverrides {
  const overrides: ModelLoadOverrides = { files: {} }
  if (parameters === undefined) return overrides
  if (!isObject(parameters)) throw errors.invalidRepositoryRequest("'parameters' must be a JSON object")
  for (const [name, value] of Object.entries(parameters)) {
    if (name === 'config') {
      if (typeof value !== 'string') throw errors.invalidLoadParameterType(name, 'a string')
      overrides.config = value
    } else if (name.startsWith('file:')) {
      if (typeof value !== 'string' || value.length % 4 !== 0 || !BASE64.test(value)) throw errors.invalidLoadParameterType(name, 'a base64 string')
      overrides.files[name] = Buffer.from(value, 'base64')
    } else {
      throw errors.unrecognizedLoadParameter(name)
    }
  }
  return overrides
}

type ModelRequest = FastifyRequest<{ Params: { model: string } }>

/** Load and unload answer 200 with no body, as Triton does. */
const done = (reply: FastifyReply) => reply.code(200).type('application/json').send()

export interface RepositoryRoutesOptions {
  models: ModelTable
  bodyLimit?: number
  openapi: KServeModelsOpenApiOptions
  /** The routes are the `model-repository` category. */
  restrictions: RestrictedFeatures
}

export async function repositoryRoutes (app: FastifyInstance, { models, bodyLimit, openapi, restrictions }: RepositoryRoutesOptions) {
  if (restrictions.isRestricted('model-repository')) app.addHook('preParsing', restrictedHook(restrictions, () => 'model-repository'))
  app.removeAllContentTypeParsers()
  app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit }, parseBody)
  const schemas = repositorySchemas(openapi)

  app.post('/v2/repository/index', { schema: schemas.index }, async (request) => {
    const { ready = false } = bodyOf(request)
    if (typeof ready !== 'boolean') throw errors.invalidIndexReady()
    return models.index(ready)
  })

  app.post('/v2/repository/models/:model/load', { schema: schemas.load }, async (request: ModelRequest, reply) => {
    await models.load(request.params.model, loadOverrides(bodyOf(request).parameters))
    return done(reply)
  })

  app.post('/v2/repository/models/:model/unload', { schema: schemas.unload }, async (request: ModelRequest, reply) => {
    const { parameters } = bodyOf(request)
    const unloadDependents = isObject(parameters) ? parameters.unload_dependents : undefined
    // No model here has dependents: the parameter is checked, and changes nothing.
    if (unloadDependents !== undefined && typeof unloadDependents !== 'boolean') throw errors.invalidUnloadDependents('a boolean')
    await models.unload(request.params.model)
    return done(reply)
  })
}
