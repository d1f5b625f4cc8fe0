/**
 * The plugin's options: checked once at registration, so a mistake fails `app.ready()` with a
 * message naming the option instead of misbehaving at the first request.
 */
import Ajv, { type ErrorObject } from 'ajv'
import type { FastifyTritonShmOptions } from '../types'
import { MAX_SAFE_INTEGER } from './schemas'

export const DEFAULT_DECORATOR = 'systemSharedMemory'

const positiveInteger = { type: 'integer', minimum: 1, maximum: MAX_SAFE_INTEGER } as const

// RFC 9110 token: the characters a header name may hold.
const HEADER_NAME = '^[!#$%&\'*+.^_`|~0-9A-Za-z-]+$'

const optionsSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    prefix: { type: 'string' },
    decorator: { type: 'string', minLength: 1 },
    allowClientShm: { type: 'boolean' },
    restrictedApi: {
      type: 'object',
      additionalProperties: false,
      required: ['header', 'value'],
      properties: {
        header: { type: 'string', pattern: HEADER_NAME },
        value: { type: 'string' }
      }
    },
    allowKey: { keyRule: true },
    reservedKeyPrefixes: { type: 'array', items: { type: 'string', minLength: 1 } },
    limits: {
      type: 'object',
      additionalProperties: false,
      properties: {
        maxRegions: positiveInteger,
        maxRegionBytes: positiveInteger,
        maxTotalBytes: positiveInteger
      }
    },
    sharedRegistry: {
      type: 'object',
      additionalProperties: false,
      required: ['path'],
      properties: {
        path: { type: 'string', minLength: 1 },
        busyTimeoutMs: positiveInteger,
        checkIntervalMs: positiveInteger
      }
    },
    openapi: {
      type: 'object',
      additionalProperties: false,
      properties: {
        hide: { type: 'boolean' },
        systemTags: { type: 'array', items: { type: 'string' } },
        cudaTags: { type: 'array', items: { type: 'string' } },
        operationIdPrefix: { type: 'string' }
      }
    },
    grpc: {
      type: 'object',
      additionalProperties: false,
      properties: {
        host: { type: 'string', minLength: 1 },
        port: { type: 'integer', minimum: 0, maximum: 65535 },
        models: { type: 'object' },
        server: {
          type: 'object',
          additionalProperties: false,
          required: ['name', 'version'],
          properties: { name: { type: 'string' }, version: { type: 'string' } }
        },
        limits: { type: 'object' }
      }
    },
    // Fastify's own register options, which reach the plugin with the others.
    logLevel: { type: 'string' },
    logSerializers: { type: 'object' }
  }
}

const ajv = new Ajv({ allErrors: false, strict: true })
ajv.addKeyword({
  keyword: 'keyRule',
  schemaType: 'boolean',
  errors: false,
  validate: (_: boolean, value: unknown) => value instanceof RegExp || typeof value === 'function'
})
const validate = ajv.compile<FastifyTritonShmOptions>(optionsSchema)

/** Ajv's first error (it reports at least one, with a message, whenever validation fails) as a
 * sentence naming the option; `messages` word the errors of custom keywords. */
export function describeOptionError ([error]: ErrorObject[], messages: Record<string, string> = {}): string {
  const path = error.instancePath.slice(1).replaceAll('/', '.')
  if (error.keyword === 'additionalProperties') {
    const unknown = (error.params as { additionalProperty: string }).additionalProperty
    return `unknown option '${path === '' ? unknown : `${path}.${unknown}`}'`
  }
  return `option '${path}' ${messages[error.keyword] ?? error.message}`
}

const MESSAGES = { keyRule: 'must be a RegExp or a function' }

/** Returns the options if they are valid; throws a TypeError naming the wrong one otherwise. */
export function checkOptions<Options extends FastifyTritonShmOptions> (options: Options): Options {
  if (!validate(options)) throw new TypeError(`fastify-triton-shm: ${describeOptionError(validate.errors as ErrorObject[], MESSAGES)}`)
  return options
}
