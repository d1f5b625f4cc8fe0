/**
 * Triton's trace extension over HTTP, from the model table: `GET` and `POST` at
 * `/v2/trace/setting` (the global settings) and `/v2/models/<m>/trace/setting` (a model's). A POST
 * body (optional, whatever its Content-Type) names the settings to change, each a string
 * (`trace_level` an array of strings), `null` to clear it; both answer the settings in use, as
 * Triton does, with its checks and texts. The routes are the `trace` category.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify'
import * as errors from '../errors'
import type { ModelTable } from '../models/model-table'
import {
  type ChangeableSetting, parseTraceLevel, parseTraceNumber, SETTING_NAMES, type TraceChange, traceSettingsResponse
} from '../models/trace-settings'
import type { RestrictedFeatures } from '../util/restricted-features'
import type { KServeModelsOpenApiOptions } from './models-options'
import { restrictedHook } from './restricted-hook'

type JsonObject = Record<string, unknown>

/** The largest settings body: a few settings take tens of bytes. */
export const TRACE_BODY_LIMIT = 64 * 1024

const isObject = (value: unknown): value is JsonObject => typeof value === 'object' && value !== null && !Array.isArray(value)

/** Any body is JSON, whatever its Content-Type, read once the model is checked (Triton's order);
 * an empty one has no fields. */
function parseBody (body: unknown): unknown {
  if (!Buffer.isBuffer(body) || body.length === 0) return {}
  try {
    return JSON.parse(body.toString())
  } catch (error) {
    throw errors.invalidTraceRequest((error as Error).message)
  }
}

/** `trace_level`: `null`, or an array of strings (as TritonJson reads it). */
function levelChange (value: unknown): TraceChange['level'] {
  if (value === null) return null
  if (!Array.isArray(value)) throw errors.traceSettingType('array')
  if (value.some((name) => typeof name !== 'string')) throw errors.traceSettingType('string')
  return parseTraceLevel(value as string[])
}

/** A body's change, read in Triton's order: `trace_file` refused first. */
function traceChangeOf (received: unknown): TraceChange {
  const body = parseBody(received)
  if (!isObject(body)) throw errors.invalidTraceRequest('the body must be a JSON object')
  if (Object.hasOwn(body, 'trace_file')) throw errors.traceFileReadOnly()
  const change: TraceChange = {}
  if (Object.hasOwn(body, 'trace_level')) change.level = levelChange(body.trace_level)
  for (const setting of ['rate', 'count', 'logFrequency'] as Array<Exclude<ChangeableSetting, 'level'>>) {
    const name = SETTING_NAMES[setting]
    if (!Object.hasOwn(body, name)) continue
    const value = body[name]
    if (value === null) change[setting] = null
    else if (typeof value !== 'string') throw errors.traceSettingType('string')
    else change[setting] = parseTraceNumber(setting, value, 'http')
  }
  return change
}

export interface TraceRoutesOptions {
  models: ModelTable
  openapi: KServeModelsOpenApiOptions
  /** The routes are the `trace` category. */
  restrictions: RestrictedFeatures
}

type TraceRequest = FastifyRequest<{ Params: { model?: string } }>

const PARAMS = { type: 'object', properties: { model: { type: 'string', description: 'Name of the model' } } }

export async function traceRoutes (app: FastifyInstance, { models, openapi, restrictions }: TraceRoutesOptions) {
  if (restrictions.isRestricted('trace')) app.addHook('preParsing', restrictedHook(restrictions, () => 'trace'))
  app.removeAllContentTypeParsers()
  app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: TRACE_BODY_LIMIT }, (_request, body, done) => done(null, body))
  const { hide = false, tags = ['KServe'], operationIdPrefix = '' } = openapi
  const schema = (operationId: string, summary: string, model: boolean) => ({
    hide,
    tags,
    operationId: operationIdPrefix + operationId,
    summary,
    description: 'Triton\'s trace extension. A POST body (optional) changes settings: {"trace_level": ["TIMESTAMPS"], "trace_rate": "<n>", ' +
      '"trace_count": "<n>", "log_frequency": "<n>"}, null clearing one. Answers the settings in use.',
    ...(model && { params: PARAMS })
  })
  // An empty name is the global setting, as over gRPC.
  const modelOf = ({ params }: TraceRequest) => params.model === '' ? undefined : params.model
  const get = async (request: TraceRequest) => traceSettingsResponse(models.traceSettings(modelOf(request)))
  const post = async (request: TraceRequest) => {
    const model = modelOf(request)
    // Triton checks the model before it reads the body.
    models.traceSettings(model)
    return traceSettingsResponse(models.updateTraceSettings(model, traceChangeOf(request.body)))
  }
  app.get('/v2/trace/setting', { schema: schema('traceSetting', 'Global trace settings', false) }, get)
  app.post('/v2/trace/setting', { schema: schema('traceSettingUpdate', 'Change the global trace settings', false) }, post)
  app.get('/v2/models/:model/trace/setting', { schema: schema('modelTraceSetting', 'A model\'s trace settings', true) }, get)
  app.post('/v2/models/:model/trace/setting', { schema: schema('modelTraceSettingUpdate', 'Change a model\'s trace settings', true) }, post)
}
