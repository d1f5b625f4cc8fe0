/**
 * Triton's logging extension: the settings in the package's (camelCase) terms, and their wire
 * shape over HTTP (`GET/POST /v2/logging`). Over gRPC they are `LogSettings`' map (./grpc.ts).
 */

/** Triton's log formats. */
export type LogFormat = 'default' | 'ISO8601'

/** Triton's six settings. */
export interface LogSettings {
  /** `log_file`: where the log goes, empty for the console; set at startup only. */
  file: string
  /** `log_info`, `log_warning`, `log_error`: each level on or off. */
  info: boolean
  warning: boolean
  error: boolean
  /** `log_verbose_level`: 0 is off; 1 and above add verbose messages (debug, then trace). */
  verboseLevel: number
  /** `log_format`. */
  format: LogFormat
}

/** A change: the settings given change, the others stay. A `file` is always refused. */
export type LogSettingsUpdate = Partial<LogSettings>

/** `GET/POST /v2/logging`'s answer, and what a POST may send (any subset; `null` changes nothing). */
export interface LogSettingsWire {
  log_file: string
  log_info: boolean
  log_warning: boolean
  log_error: boolean
  log_verbose_level: number
  log_format: LogFormat
}
