/**
 * The options of the model endpoints plugin, checked once at registration: a mistake fails
 * `app.ready()` with a message naming the option.
 */
import Ajv, { type ErrorObject } from 'ajv'
import type { KServeModelsOptions } from '../../types/models'
import { ModelTable } from '../models/model-table'
import { DEFAULT_DECORATOR } from '../options'
import { MAX_SAFE_INTEGER } from '../schemas'

const positiveInteger = { type: 'integer', minimum: 1, maximum: MAX_SAFE_INTEGER } as const

const optionsSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['models'],
  properties: {
    models: { modelTable: true },
    name: { type: 'string' },
    version: { type: 'string' },
    decorator: { type: 'string', minLength: 1 },
    bodyLimit: positiveInteger,
    jsonLimit: positiveInteger,
    limits: {
      type: 'object',
      additionalProperties: false,
      properties: { maxBytesElements: positiveInteger, maxJsonResponseChars: positiveInteger }
    },
    beforeRun: { isFunction: true },
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

const MESSAGES: Record<string, string> = {
  modelTable: 'must be a ModelTable',
  isFunction: 'must be a function'
}

const ajv = new Ajv({ allErrors: false, strict: true })
ajv.addKeyword({ keyword: 'modelTable', schemaType: 'boolean', errors: false, validate: (_: boolean, value: unknown) => value instanceof ModelTable })
ajv.addKeyword({ keyword: 'isFunction', schemaType: 'boolean', errors: false, validate: (_: boolean, value: unknown) => typeof value === 'function' })
const validate = ajv.compile<KServeModelsOptions>(optionsSchema)

function describeError ([error]: ErrorObject[]): string {
  const path = error.instancePath.slice(1).replaceAll('/', '.')
  if (error.keyword === 'additionalProperties') {
    const unknown = (error.params as { additionalProperty: string }).additionalProperty
    return `unknown option '${path === '' ? unknown : `${path}.${unknown}`}'`
  }
  if (error.keyword === 'required') return `option '${(error.params as { missingProperty: string }).missingProperty}' is required`
  return `option '${path}' ${MESSAGES[error.keyword] ?? error.message}`
}

/** The options with their defaults if they are valid; throws a TypeError naming the wrong one otherwise. */
export function checkModelsOptions (options: KServeModelsOptions) {
  if (!validate(options)) throw new TypeError(`fastify-triton-shm models: ${describeError(validate.errors as ErrorObject[])}`)
  const { name = 'fastify-triton-shm', version = '', decorator = DEFAULT_DECORATOR, openapi = {}, ...rest } = options
  return { ...rest, name, version, decorator, openapi }
}
