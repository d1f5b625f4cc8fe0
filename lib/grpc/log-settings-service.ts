/**
 * Triton's logging extension over gRPC (`LogSettings`): the settings named in the request change
 * (each in its own `parameter_choice`, else INVALID_ARGUMENT `expect <type> for '<setting>'`;
 * `log_file` UNIMPLEMENTED, whatever it holds), and the answer is every setting, as Triton's.
 */
import type { handleUnaryCall, ServerUnaryCall } from '@grpc/grpc-js'
import type { LogSettingsRequest, LogSettingsResponse, LogSettingValue } from '../../types/grpc'
import type { LogSettings, LogSettingsUpdate } from '../../types/logging'
import * as errors from '../errors'
import { isLogFormat, type ServerLogging } from '../models/server-logging'
import type { ErrorLogger } from './status'
import { unary } from './unary'

type Settings = Record<string, LogSettingValue>

/** The value of a setting sent as `choice`, or undefined if it was not sent; throws Triton's
 * refusal for one sent as another. */
function valueOf<Choice extends 'bool_param' | 'uint32_param' | 'string_param'> (settings: Settings, name: string, choice: Choice,
  expected: 'boolean' | 'int32' | 'string'): LogSettingValue[Choice] | undefined {
  if (!Object.hasOwn(settings, name)) return undefined
  const setting = settings[name]
  if (setting.parameter_choice !== choice) throw errors.logSettingParamType(expected, name)
  return setting[choice]
}

/** The change a request asks for, checked in Triton's order. */
function updateOf (settings: Settings): LogSettingsUpdate {
  if (Object.hasOwn(settings, 'log_file')) throw errors.logFileUnsupported()
  const update: LogSettingsUpdate = {}
  const info = valueOf(settings, 'log_info', 'bool_param', 'boolean')
  if (info !== undefined) update.info = info
  const warning = valueOf(settings, 'log_warning', 'bool_param', 'boolean')
  if (warning !== undefined) update.warning = warning
  const error = valueOf(settings, 'log_error', 'bool_param', 'boolean')
  if (error !== undefined) update.error = error
  const verboseLevel = valueOf(settings, 'log_verbose_level', 'uint32_param', 'int32')
  if (verboseLevel !== undefined) update.verboseLevel = verboseLevel
  const format = valueOf(settings, 'log_format', 'string_param', 'string')
  if (format !== undefined) {
    if (!isLogFormat(format)) throw errors.invalidLogFormat('log_format', format)
    update.format = format
  }
  return update
}

const text = (value: string): LogSettingValue => ({ string_param: value })
const flag = (value: boolean): LogSettingValue => ({ bool_param: value })

/** Every setting, each in its own `parameter_choice`. */
export function logSettingsMessage ({ file, info, warning, error, verboseLevel, format }: LogSettings): LogSettingsResponse {
  return {
    settings: {
      log_file: text(file),
      log_info: flag(info),
      log_warning: flag(warning),
      log_error: flag(error),
      log_verbose_level: { uint32_param: verboseLevel },
      log_format: text(format)
    }
  }
}

export function logSettingsHandler (logging: ServerLogging, log?: ErrorLogger): handleUnaryCall<LogSettingsRequest, LogSettingsResponse> {
  return unary(({ request }: ServerUnaryCall<LogSettingsRequest, LogSettingsResponse>) =>
    logSettingsMessage(logging.update(updateOf(request.settings))), log)
}
