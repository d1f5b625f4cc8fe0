/**
 * Triton's logging extension over HTTP: `GET /v2/logging` answers every setting, `POST
 * /v2/logging` changes those its JSON body names (`null` changes nothing) and answers every
 * setting, with Triton's checks and texts: TritonJson's for a value of the wrong type, `log_file`
 * refused (501), a format other than `default` and `ISO8601` refused. Bodies are read whatever
 * their Content-Type (Triton's clients send none).
 */
import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { LogSettings, LogSettingsUpdate, LogSettingsWire } from '../../types/logging'
import * as errors from '../errors'
import { isLogFormat, MAX_VERBOSE_LEVEL, type ServerLogging } from '../models/server-logging'
import type { RestrictedFeatures } from '../util/restricted-features'
import type { KServeModelsOpenApiOptions } from './models-options'
import { restrictedHook } from './restricted-hook'
import { errorResponseSchema } from './shared-memory-schemas'

type JsonObject = Record<string, unknown>

function parseBody (_request: FastifyRequest, body: Buffer, done: (error: Error | null, body?: unknown) => void): void {
  try {
    done(null, JSON.parse(body.toString()))
  } catch (error) {
    done(errors.invalidLoggingRequest((error as Error).message))
  }
}

/** A setting's value, if the body gives one (`null` gives none); `isOfType` else throws TritonJson's words. */
function valueOf<T> (body: JsonObject, name: keyof LogSettingsWire, isOfType: (value: unknown) => value is T,
  type: 'boolean' | 'unsigned-integer' | 'string'): T | undefined {
  const value = body[name]
  if (value === undefined || value === null) return undefined
  if (!isOfType(value)) throw errors.logSettingJsonType(type)
  return value
}

const isBoolean = (value: unknown): value is boolean => typeof value === 'boolean'
const isString = (value: unknown): value is string => typeof value === 'string'
const isVerboseLevel = (value: unknown): value is number => Number.isInteger(value) && (value as number) >= 0 && (value as number) <= MAX_VERBOSE_LEVEL

/** The change a body asks for, checked in Triton's order. */
function updateOf (body: unknown): LogSettingsUpdate {
  if (body === undefined) throw errors.invalidLoggingRequest('the body is empty')
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw errors.invalidLoggingRequest('the body must be a JSON object')
  const fields = body as JsonObject
  if (fields.log_file !== undefined && fields.log_file !== null) throw errors.logFileUnsupported()
  const update: LogSettingsUpdate = {}
  const info = valueOf(fields, 'log_info', isBoolean, 'boolean')
  if (info !== undefined) update.info = info
  const warning = valueOf(fields, 'log_warning', isBoolean, 'boolean')
  if (warning !== undefined) update.warning = warning
  const error = valueOf(fields, 'log_error', isBoolean, 'boolean')
  if (error !== undefined) update.error = error
  const verboseLevel = valueOf(fields, 'log_verbose_level', isVerboseLevel, 'unsigned-integer')
  if (verboseLevel !== undefined) update.verboseLevel = verboseLevel
  const format = valueOf(fields, 'log_format', isString, 'string')
  if (format !== undefined) {
    if (!isLogFormat(format)) throw errors.invalidLogFormat('--log_format', format)
    update.format = format
  }
  return update
}

/** Every setting, in Triton's names and order. */
export const logSettingsWire = ({ file, info, warning, error, verboseLevel, format }: LogSettings): LogSettingsWire =>
  ({ log_file: file, log_info: info, log_warning: warning, log_error: error, log_verbose_level: verboseLevel, log_format: format })

const settingsSchema = {
  description: 'Every setting',
  type: 'object',
  properties: {
    log_file: { type: 'string', description: 'Where the log goes (empty: the console); set at startup only' },
    log_info: { type: 'boolean' },
    log_warning: { type: 'boolean' },
    log_error: { type: 'boolean' },
    log_verbose_level: { type: 'integer', minimum: 0, description: '0: off; 1: debug; 2 and above: trace' },
    log_format: { type: 'string', enum: ['default', 'ISO8601'] }
  }
}

function schemasOf ({ hide = false, tags = ['KServe'], operationIdPrefix = '' }: KServeModelsOpenApiOptions) {
  const failures = { '4xx': { description: 'A setting of the wrong type, or `log_file`', ...errorResponseSchema } }
  return {
    get: { hide, tags, operationId: `${operationIdPrefix}logSettings`, summary: 'Log settings', response: { 200: settingsSchema } },
    post: {
      hide,
      tags,
      operationId: `${operationIdPrefix}updateLogSettings`,
      summary: 'Change log settings',
      description: 'Changes the settings the body names, in every process of the service; answers every setting.',
      response: { 200: settingsSchema, ...failures }
    }
  }
}

export interface LoggingRoutesOptions {
  logging: ServerLogging
  openapi: KServeModelsOpenApiOptions
  /** The routes are the `logging` category. */
  restrictions: RestrictedFeatures
}

export async function loggingRoutes (app: FastifyInstance, { logging, openapi, restrictions }: LoggingRoutesOptions) {
  if (restrictions.isRestricted('logging')) app.addHook('preParsing', restrictedHook(restrictions, () => 'logging'))
  app.removeAllContentTypeParsers()
  app.addContentTypeParser('*', { parseAs: 'buffer' }, parseBody)
  const schemas = schemasOf(openapi)
  app.get('/v2/logging', { schema: schemas.get }, async () => logSettingsWire(logging.settings()))
  app.post('/v2/logging', { schema: schemas.post }, async (request) => logSettingsWire(logging.update(updateOf(request.body))))
}
