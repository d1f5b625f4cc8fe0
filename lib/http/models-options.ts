/**
 * The options of the model endpoints plugin, checked once at registration: a mistake fails
 * `app.ready()` with a message naming the option.
 */
import type { FastifyRequest } from 'fastify'
import type { RestrictionGroup } from '../../types'
import type { InferLimits } from '../../types/kserve'
import * as errors from '../errors'
import type { InferRequest } from '../kserve/infer-request'
import { inferLimitsSchema } from '../kserve/infer-limits'
import { ModelTable } from '../models/model-table'
import { ServerLogging } from '../models/server-logging'
import { DEFAULT_DECORATOR } from './decorator'
import { describeOptionProblem, positiveInteger, validatorOf } from '../util/options-validator'
import { RestrictedFeatures, restrictionGroupsSchema } from '../util/restricted-features'

/** How the model endpoints appear in a host's OpenAPI document (@fastify/swagger). */
export interface KServeModelsOpenApiOptions {
  /** Leave every model endpoint out of the document. Default false. */
  hide?: boolean
  /** Tags of the routes. Default `['KServe']`. */
  tags?: string[]
  /** Put before every operationId (two registrations in one document need distinct ids). Default none. */
  operationIdPrefix?: string
}

/** Options of the `kserveModels` plugin: the KServe V2 server, health and model endpoints. */
export interface KServeModelsOptions {
  /** The models to serve (the same table a gRPC service may serve). */
  models: ModelTable
  /** The server's name in its metadata (`GET /v2`). Default `fastify-triton-shm`. */
  name?: string
  /** The server's version in its metadata. Default `''`: give your service's. */
  version?: string
  /** Name of the registry decorator that resolves `shared_memory_region` parameters: the
   * `decorator` option fastify-triton-shm was registered with. Default `systemSharedMemory`. */
  decorator?: string
  /** Largest infer body, JSON and binary data together, in bytes. Default: Fastify's `bodyLimit`. */
  bodyLimit?: number
  /** Largest JSON part of an infer body, in bytes. Default 64 MiB, as Triton's. */
  jsonLimit?: number
  /** What one infer request may cost (defaults: `DEFAULT_INFER_LIMITS`). */
  limits?: InferLimits
  /** Awaited once an infer request is read (it holds its regions), before its model runs: a host's
   * admission control or tracing. Its time counts as `queue` in the statistics; a throw fails the request. */
  beforeRun?: (request: FastifyRequest, infer: InferRequest) => void | Promise<void>
  openapi?: KServeModelsOpenApiOptions
  /** Triton's `--http-restricted-api`: the endpoints of each group's categories (`health`,
   * `metadata`, `inference`, `model-config`, `statistics`, `model-repository` here) served only to
   * requests that carry its header with its value, else 403. Every category Triton has is
   * accepted; an unknown one, or one in two groups, fails the registration with Triton's text. */
  restrictedApis?: RestrictionGroup[]
  /** Serve Triton's logging extension (`GET/POST /v2/logging`, the `logging` category) over the
   * app's logger: the same `ServerLogging` the gRPC listener's `logging` serves. Default none. */
  logging?: ServerLogging
}

/** The options of `kserveModels`, as the validator checks them (the README's table lists each). */
export const modelsOptionsSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['models'],
  properties: {
    models: { instanceOf: ModelTable },
    name: { type: 'string' },
    version: { type: 'string' },
    decorator: { type: 'string', minLength: 1 },
    bodyLimit: positiveInteger,
    jsonLimit: positiveInteger,
    limits: inferLimitsSchema,
    beforeRun: { isFunction: true },
    restrictedApis: restrictionGroupsSchema,
    logging: { instanceOf: ServerLogging },
    openapi: {
      type: 'object',
      additionalProperties: false,
      properties: {
        hide: { type: 'boolean' },
        tags: { type: 'array', items: { type: 'string' } },
        operationIdPrefix: { type: 'string' }
      }
    },
    // Fastify's own register options, which reach the plugin with the others.
    prefix: { type: 'string' },
    logLevel: { type: 'string' },
    logSerializers: { type: 'object' }
  }
}

const problemOf = validatorOf(modelsOptionsSchema)

export const MODELS_PLUGIN = 'fastify-triton-shm models'

/** The options with their defaults if they are valid; throws `ERR_SHM_INVALID_OPTION` naming the wrong one otherwise. */
export function checkModelsOptions (options: KServeModelsOptions) {
  const problem = problemOf(options)
  if (problem !== undefined) throw errors.invalidOption(MODELS_PLUGIN, describeOptionProblem(problem))
  const { name = 'fastify-triton-shm', version = '', decorator = DEFAULT_DECORATOR, openapi = {}, restrictedApis = [], ...rest } = options
  return { ...rest, name, version, decorator, openapi, restrictions: new RestrictedFeatures(restrictedApis, 'http', MODELS_PLUGIN) }
}
