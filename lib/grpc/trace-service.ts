/**
 * Triton's trace extension over gRPC (`TraceSetting`), from the model table the HTTP routes
 * serve: each setting a list of strings, an empty list clearing it, with Triton's checks and
 * texts (`trace_file` refused, one value for each number).
 */
import type { TraceSettingRequest, TraceSettingResponse } from '../../types/grpc'
import * as errors from '../errors'
import type { ModelTable } from '../models/model-table'
import {
  type ChangeableSetting, parseTraceLevel, parseTraceNumber, SETTING_NAMES, type TraceChange, traceSettingsResponse
} from '../models/trace-settings'

/** A request's settings, read in Triton's order: `trace_file` refused first. */
function traceChangeOf (settings: TraceSettingRequest['settings']): TraceChange {
  if (Object.hasOwn(settings, 'trace_file')) throw errors.traceFileReadOnly()
  const change: TraceChange = {}
  if (Object.hasOwn(settings, 'trace_level')) {
    const { value } = settings.trace_level
    change.level = value.length === 0 ? null : parseTraceLevel(value)
  }
  for (const setting of ['rate', 'count', 'logFrequency'] as Array<Exclude<ChangeableSetting, 'level'>>) {
    const name = SETTING_NAMES[setting]
    if (!Object.hasOwn(settings, name)) continue
    const { value } = settings[name]
    if (value.length > 1) throw errors.traceSettingValues(name)
    change[setting] = value.length === 0 ? null : parseTraceNumber(setting, value[0], 'grpc')
  }
  return change
}

/** The settings of the request's model (none: the global ones), changed first if it names any. */
export function traceSetting (models: ModelTable, { settings, model_name: name }: TraceSettingRequest): TraceSettingResponse {
  const model = name === '' ? undefined : name
  // Triton checks the model before it reads the settings.
  let values = models.traceSettings(model)
  if (Object.keys(settings).length > 0) values = models.updateTraceSettings(model, traceChangeOf(settings))
  const response: TraceSettingResponse = { settings: {} }
  for (const [setting, value] of Object.entries(traceSettingsResponse(values))) response.settings[setting] = { value: typeof value === 'string' ? [value] : value }
  return response
}
