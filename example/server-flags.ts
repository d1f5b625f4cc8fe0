/**
 * `tritonserver`'s command-line options that the example service takes
 * (`npm run example:server -- --model-control-mode=explicit --load-model=simple`), each mapped to an
 * option the package already has. They are read as tritonserver reads them: `--name=value` or
 * `--name value` (the next argument, whatever it is), every option with a value, booleans as
 * `true`/`on`/`1` or `false`/`off`/`0` in any case, and a bad value refused with tritonserver's
 * own words (`Bad option: "--<name>".` then why). An option the example does not take is refused
 * by name, never ignored: a server that ignored `--model-control-mode=none` would answer what
 * tritonserver refuses. `--model-repository` is the one exception: the example's models are code,
 * so its paths are kept only to be logged.
 */
import type { LogSettings, ModelRepositoryOptions, RestrictedCategory, RestrictionGroup, TraceOptions } from '../lib/index'

/** What the options set: each field named after the option of the service or package it maps to. */
export interface ServerFlags {
  /** --http-address, --http-port: where HTTP listens. */
  httpHost?: string
  httpPort?: number
  /** --grpc-address, --grpc-port: where gRPC listens. */
  grpcHost?: string
  grpcPort?: number
  /** --metrics-address, --metrics-port: where the metrics listen on a port of their own. */
  metricsHost?: string
  metricsPort?: number
  /** --allow-http, --allow-grpc, --allow-metrics: each endpoint served or not. */
  http?: boolean
  grpc?: boolean
  metrics?: boolean
  /** --allow-client-shm: the plugin's `allowClientShm`. */
  allowClientShm?: boolean
  /** --model-control-mode and --load-model: the model table's `repository` option. */
  repository?: ModelRepositoryOptions
  /** --http-max-input-size: the infer body parser's `jsonLimit`. */
  jsonLimit?: number
  /** --http-restricted-api: the plugin's and the model endpoints' `restrictedApis`. */
  restrictedApis?: RestrictionGroup[]
  /** --grpc-restricted-protocol: the gRPC listener's `restrictedProtocols` (keys as tritonserver
   * names them, `triton-grpc-protocol-<key>`). */
  restrictedProtocols?: RestrictionGroup[]
  /** --grpc-max-response-pool-size: checked as tritonserver checks it; a stream here already holds
   * a bounded number of responses (see docs/example.md). */
  maxResponsePoolSize?: number
  /** --metrics-config: the metrics plugin's `latencyCounters`, `histograms` and `summaries`. */
  metricsConfig?: MetricsConfig
  /** --trace-config: the model table's `trace` settings. */
  trace?: TraceOptions
  /** --model-repository (or --model-store): paths the example does not read. */
  modelRepositories: string[]
  /** --log-verbose, --log-info, --log-warning, --log-error, --log-format, --log-file: the logging
   * extension's settings at startup (`ServerLogging`), and where and how the logger writes. */
  logging?: Partial<LogSettings>
}

/** What tritonserver's `--metrics-config <setting>=<value>` settings set, each named after the
 * metrics plugin's option (`quantiles`: its `summaries.quantiles`). */
export interface MetricsConfig {
  /** counter_latencies */
  latencyCounters?: boolean
  /** histogram_latencies */
  histograms?: boolean
  /** summary_latencies */
  summaries?: boolean
  /** summary_quantiles: the quantiles (the error of each pair is not used: the example's quantiles are exact) */
  quantiles?: number[]
}

/** An option refused: the message to print, as tritonserver prints it, before exiting with 1. */
export class ServerFlagError extends Error {
  override name = 'ServerFlagError'
}

/** A value an option cannot take: tritonserver's reason, printed under `Bad option: "--<name>".`. */
class BadValue extends Error {}

/** tritonserver's header for gRPC restrictions: its clients send `triton-grpc-protocol-<key>`. */
const GRPC_RESTRICTION_PREFIX = 'triton-grpc-protocol-'

/** The categories tritonserver restricts. */
const RESTRICTED_CATEGORIES: readonly string[] = [
  'health', 'metadata', 'inference', 'shared-memory', 'model-config', 'model-repository', 'statistics', 'trace', 'logging'
]

/** What parsing keeps besides the flags: tritonserver's checks that span several options. */
interface ParseState {
  flags: ServerFlags
  controlMode?: 'none' | 'explicit'
  loadModels: string[]
  /** The categories restricted so far, by option: tritonserver refuses one named twice. */
  restricted: Map<string, Set<string>>
  /** --trace-config's settings so far; `off`: a level `off` was given. */
  trace?: TraceOptions & { off?: boolean }
}

/** tritonserver's `ParseOption<bool>`. */
function parseBoolean (value: string): boolean {
  const lower = value.toLowerCase()
  if (['true', 'on', '1'].includes(lower)) return true
  if (['false', 'off', '0'].includes(lower)) return false
  throw new BadValue(`invalid value for bool option: ${value}`)
}

/** tritonserver's integer options: `Invalid option value` for what is no integer (stricter than
 * its `std::stoi`, which reads `8000abc` as 8000), out of bound past `max`. */
function parseInteger (value: string, max: number): number {
  if (!/^\s*[+-]?\d+$/.test(value)) throw new BadValue(`Invalid option value. Got ${value}`)
  const number = Number(value)
  if (Math.abs(number) > max) throw new BadValue(`Provided option value is out of bound. Got ${value}`)
  return number
}

const INT32_MAX = 2 ** 31 - 1

function parsePort (value: string): number {
  const port = parseInteger(value, INT32_MAX)
  if (port < 0 || port > 65535) throw new BadValue(`a port is a number from 0 to 65535 (0: any free port), got ${value}`)
  return port
}

/** tritonserver's `--http-max-input-size` (an int64 there; here at most what a JavaScript number holds exactly). */
function parseMaxInputSize (value: string): number {
  const size = parseInteger(value, Number.MAX_SAFE_INTEGER)
  if (size <= 0) throw new BadValue('Error: --http-max-input-size must be greater than 0.')
  return size
}

function parseControlMode (value: string): 'none' | 'explicit' {
  const mode = value.toLowerCase()
  if (mode === 'none' || mode === 'explicit') return mode
  if (mode === 'poll') throw new BadValue('the example has no model repository to poll: its models are code (use none or explicit)')
  throw new BadValue('invalid argument for --model-control-mode')
}

/**
 * tritonserver's `<categories>:<key>=<value>` (`ParseRestrictedFeatureOption`): its format, an
 * unknown category and one named twice refused in its words; the group kept for its transport.
 */
function addRestriction (state: ParseState, option: string, feature: 'api' | 'protocol', headerPrefix: string, argument: string): RestrictionGroup {
  const colon = argument.indexOf(':')
  const equals = argument.indexOf('=', colon + 1)
  const [categories, key, value] = [argument.slice(0, colon), argument.slice(colon + 1, equals), argument.slice(equals + 1)]
  if (colon < 0 || equals < 0 || categories === '' || key === '' || value === '') {
    throw new BadValue(`--${option} option format is '<config name>:<setting>=<value>'. Got ${argument}`)
  }
  const named = state.restricted.get(option) ?? new Set<string>()
  state.restricted.set(option, named)
  for (const category of categories.split(',')) {
    if (!RESTRICTED_CATEGORIES.includes(category)) throw new BadValue(`unknown restricted ${feature} '${category}' `)
    if (named.has(category)) throw new BadValue(`restricted ${feature} '${category}' can not be specified in multiple config groups`)
    named.add(category)
  }
  return { categories: categories.split(',') as RestrictedCategory[], header: headerPrefix + key, value }
}

/** tritonserver's `--grpc-max-response-pool-size`: an int, more than 0. */
function parsePoolSize (value: string): number {
  const size = parseInteger(value, INT32_MAX)
  if (size <= 0) throw new BadValue('Error: --grpc-max-response-pool-size must be greater than 0.')
  return size
}

/** tritonserver's `--metrics-config` format (`ParseMetricsConfigOption`): `<setting>=<value>`, both
 * non-empty, the setting without a comma (no per-group settings). */
function metricsSetting (argument: string): [setting: string, value: string] {
  const equals = argument.indexOf('=')
  const [setting, value] = [argument.slice(0, equals), argument.slice(equals + 1)]
  if (equals < 0 || setting.includes(',') || setting === '' || value === '') {
    throw new BadValue(`--metrics-config option format is <setting>=<value>. Got ${argument}`)
  }
  return [setting, value]
}

/** Triton's core reads these as `true` or `false` exactly (another value leaves the default there,
 * silently): the example refuses another value rather than ignore it. */
function metricsSwitch (setting: string, value: string): boolean {
  if (value === 'true' || value === 'false') return value === 'true'
  throw new BadValue(`metrics setting '${setting}' is true or false, got ${value}`)
}

/** `summary_quantiles=<quantile>:<error>,...`: each number read as Triton's `std::stod` reads it
 * (its leading number); a pair Triton would log and skip is refused. */
function parseQuantiles (value: string): number[] {
  return value.split(',').map((pair) => {
    const colon = pair.indexOf(':')
    const [quantile, error] = colon < 0 ? [Number.NaN, Number.NaN] : [Number.parseFloat(pair.slice(0, colon)), Number.parseFloat(pair.slice(colon + 1))]
    if (!(quantile >= 0 && quantile <= 1) || Number.isNaN(error)) {
      throw new BadValue(`Invalid option: [${pair}]. Expected format is <quantile>:<error>, a quantile from 0 to 1`)
    }
    return quantile
  })
}

/** The settings the example takes, as Triton's core reads them (metric_model_reporter.cc). */
const METRICS_SETTINGS: Record<string, (config: MetricsConfig, setting: string, value: string) => void> = {
  counter_latencies: (config, setting, value) => { config.latencyCounters = metricsSwitch(setting, value) },
  histogram_latencies: (config, setting, value) => { config.histograms = metricsSwitch(setting, value) },
  summary_latencies: (config, setting, value) => { config.summaries = metricsSwitch(setting, value) },
  summary_quantiles: (config, _setting, value) => { config.quantiles = parseQuantiles(value) }
}

/** One `--metrics-config`: later settings win, as in tritonserver. A setting Triton's core does not
 * read, it keeps and ignores; the example refuses it by name. */
function addMetricsSetting ({ flags }: ParseState, argument: string): void {
  const [setting, value] = metricsSetting(argument)
  const apply = Object.hasOwn(METRICS_SETTINGS, setting) ? METRICS_SETTINGS[setting] : undefined
  if (apply === undefined) {
    throw new BadValue(`unknown metrics setting '${setting}': the example takes ${Object.keys(METRICS_SETTINGS).join(', ')}`)
  }
  flags.metricsConfig ??= {}
  apply(flags.metricsConfig, setting, value)
}

/** tritonserver's `--log-verbose`: `true` is 1, `false` 0, else a level (here not below 0). */
function parseVerboseLevel (value: string): number {
  const lower = value.toLowerCase()
  if (lower === 'true' || lower === 'false') return lower === 'true' ? 1 : 0
  const level = parseInteger(value, INT32_MAX)
  if (level < 0) throw new BadValue(`a verbose level is 0 or more, got ${value}`)
  return level
}

function parseLogFormat (value: string): 'default' | 'ISO8601' {
  if (value === 'default' || value === 'ISO8601') return value
  throw new BadValue('invalid argument for --log-format')
}

/** tritonserver's trace modes (`ParseTraceModeOption`). */
function traceMode (value: string): 'triton' | 'opentelemetry' {
  const mode = value.toLowerCase()
  if (mode === 'triton' || mode === 'opentelemetry') return mode
  throw new BadValue(`invalid value for trace mode option: ${mode}. Available options are "triton" and "opentelemetry"`)
}

/** tritonserver's `opentelemetry,` settings configure the exporter it brings; the example brings
 * none (its spans go to the host's registered SDK, which reads its own settings). */
const OPENTELEMETRY_SDK_SETTINGS: Record<string, string> = {
  url: 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT',
  resource: 'OTEL_RESOURCE_ATTRIBUTES',
  bsp_max_queue_size: 'OTEL_BSP_MAX_QUEUE_SIZE',
  bsp_schedule_delay: 'OTEL_BSP_SCHEDULE_DELAY',
  bsp_max_export_batch_size: 'OTEL_BSP_MAX_EXPORT_BATCH_SIZE'
}

/** tritonserver's `--trace-config [<mode>,]<setting>=<value>` format (`ParseTraceConfigOption`). */
function traceSetting (argument: string): [mode: string, setting: string, value: string] {
  const comma = argument.indexOf(',')
  if (comma === 0) {
    throw new BadValue(`No trace mode specified. --trace-config option format is <trace mode>,<setting>=<value> or <setting>=<value>. Got ${argument}`)
  }
  const mode = comma < 0 ? '' : traceMode(argument.slice(0, comma))
  const equals = argument.indexOf('=', comma + 1)
  const [setting, value] = [argument.slice(comma + 1, equals), argument.slice(equals + 1)]
  if (equals < 0 || setting === '' || value === '') {
    throw new BadValue(`--trace-config option format is '<trace mode>,<setting>=<value>'. Got ${argument}`)
  }
  return [mode, setting, value]
}

/** tritonserver's trace levels (`ParseTraceLevelOption`): undefined for `off`. */
function traceLevel (value: string): 'TIMESTAMPS' | 'TENSORS' | undefined {
  const lower = value.toLowerCase()
  if (['false', 'off'].includes(lower)) return undefined
  if (['true', 'on', 'min', 'max', 'timestamps'].includes(lower)) return 'TIMESTAMPS'
  if (lower === 'tensors') return 'TENSORS'
  throw new BadValue(`invalid value for trace level option: ${lower}`)
}

function nonNegative (value: string, min = 0): number {
  const number = parseInteger(value, INT32_MAX)
  if (number < min) throw new BadValue(`a trace setting here is at least ${min}, got ${value}`)
  return number
}

/** The settings the example takes: the global ones, and `file`, `log-frequency` of triton mode
 * (tritonserver reads those two only after `triton,`). */
const TRACE_SETTINGS: Record<string, (trace: TraceOptions & { off?: boolean }, value: string, mode: string) => void> = {
  level: (trace, value) => {
    const level = traceLevel(value)
    // Levels add up; `off` anywhere turns tracing off, as in tritonserver.
    if (level === undefined) trace.off = true
    else if (!(trace.level ??= []).includes(level)) trace.level.push(level)
  },
  rate: (trace, value) => { trace.rate = nonNegative(value) },
  count: (trace, value) => { trace.count = nonNegative(value, -1) },
  mode: (trace, value) => { trace.mode = traceMode(value) },
  file: (trace, value, mode) => { if (mode === 'triton') trace.file = value },
  'log-frequency': (trace, value, mode) => { if (mode === 'triton') trace.logFrequency = nonNegative(value) }
}

/** One `--trace-config`. A setting tritonserver would keep and ignore is refused by name. */
function addTraceSetting (state: ParseState, argument: string): void {
  const [mode, setting, value] = traceSetting(argument)
  if (mode === 'opentelemetry' && Object.hasOwn(OPENTELEMETRY_SDK_SETTINGS, setting)) {
    throw new BadValue(`the example brings no OpenTelemetry SDK: '${setting}' is a setting of the host's SDK (${OPENTELEMETRY_SDK_SETTINGS[setting]})`)
  }
  const apply = Object.hasOwn(TRACE_SETTINGS, setting) ? TRACE_SETTINGS[setting] : undefined
  if (apply === undefined) throw new BadValue(`unknown trace setting '${setting}': the example takes ${Object.keys(TRACE_SETTINGS).join(', ')}`)
  apply(state.trace ??= {}, value, mode)
}

type Apply = (state: ParseState, value: string) => void

/** Every option the example takes, by its name in tritonserver. */
const OPTIONS: Record<string, Apply> = {
  'http-port': ({ flags }, value) => { flags.httpPort = parsePort(value) },
  'grpc-port': ({ flags }, value) => { flags.grpcPort = parsePort(value) },
  'metrics-port': ({ flags }, value) => { flags.metricsPort = parsePort(value) },
  'http-address': ({ flags }, value) => { flags.httpHost = value },
  'grpc-address': ({ flags }, value) => { flags.grpcHost = value },
  'metrics-address': ({ flags }, value) => { flags.metricsHost = value },
  'allow-http': ({ flags }, value) => { flags.http = parseBoolean(value) },
  'allow-grpc': ({ flags }, value) => { flags.grpc = parseBoolean(value) },
  'allow-metrics': ({ flags }, value) => { flags.metrics = parseBoolean(value) },
  'allow-client-shm': ({ flags }, value) => { flags.allowClientShm = parseBoolean(value) },
  'model-control-mode': (state, value) => { state.controlMode = parseControlMode(value) },
  'load-model': (state, value) => { if (!state.loadModels.includes(value)) state.loadModels.push(value) },
  'http-max-input-size': ({ flags }, value) => { flags.jsonLimit = parseMaxInputSize(value) },
  'http-restricted-api': (state, value) => {
    (state.flags.restrictedApis ??= []).push(addRestriction(state, 'http-restricted-api', 'api', '', value))
  },
  'grpc-restricted-protocol': (state, value) => {
    (state.flags.restrictedProtocols ??= []).push(addRestriction(state, 'grpc-restricted-protocol', 'protocol', GRPC_RESTRICTION_PREFIX, value))
  },
  'grpc-max-response-pool-size': ({ flags }, value) => { flags.maxResponsePoolSize = parsePoolSize(value) },
  'metrics-config': addMetricsSetting,
  'trace-config': addTraceSetting,
  'model-repository': ({ flags }, value) => { flags.modelRepositories.push(value) },
  'model-store': ({ flags }, value) => { flags.modelRepositories.push(value) },
  // The logging extension's settings at startup (over LOG_LEVEL's level).
  'log-verbose': ({ flags }, value) => { (flags.logging ??= {}).verboseLevel = parseVerboseLevel(value) },
  'log-info': ({ flags }, value) => { (flags.logging ??= {}).info = parseBoolean(value) },
  'log-warning': ({ flags }, value) => { (flags.logging ??= {}).warning = parseBoolean(value) },
  'log-error': ({ flags }, value) => { (flags.logging ??= {}).error = parseBoolean(value) },
  'log-format': ({ flags }, value) => { (flags.logging ??= {}).format = parseLogFormat(value) },
  'log-file': ({ flags }, value) => { (flags.logging ??= {}).file = value }
}

/** The names of the options the example takes. */
export const SERVER_FLAG_NAMES = Object.keys(OPTIONS).map((name) => `--${name}`)

/** tritonserver's checks of options taken together, once all are read. */
function finish (state: ParseState): ServerFlags {
  const { flags, controlMode, loadModels, trace } = state
  if (trace !== undefined) {
    const { off = false, ...settings } = trace
    flags.trace = off ? { ...settings, level: [] } : settings
  }
  if (loadModels.length > 0 && controlMode !== 'explicit') {
    throw new ServerFlagError("Error: Use of '--load-model' requires setting '--model-control-mode=explicit' as well.")
  }
  if (loadModels.includes('*') && loadModels.length > 1) {
    throw new ServerFlagError("Wildcard model name '*' must be the ONLY startup model if specified at all.")
  }
  if (controlMode === 'none') flags.repository = { controlMode }
  // tritonserver's explicit mode loads only the models --load-model names (all of them for '*').
  if (controlMode === 'explicit') flags.repository = { controlMode, ...(!loadModels.includes('*') && { startupModels: loadModels }) }
  return flags
}

/** Reads tritonserver's options from `args` (the arguments after the script's name); throws a
 * `ServerFlagError` with tritonserver's message for the first one it refuses. */
export function parseServerFlags (args: readonly string[]): ServerFlags {
  const state: ParseState = { flags: { modelRepositories: [] }, loadModels: [], restricted: new Map() }
  // As getopt reads them: the options first, wherever they are; what is not one is refused after.
  const others: string[] = []
  for (let index = 0; index < args.length; index++) {
    const argument = args[index]
    if (argument === '--') {
      others.push(...args.slice(index + 1))
      break
    }
    if (!argument.startsWith('--')) {
      others.push(argument)
      continue
    }
    const equals = argument.indexOf('=')
    const name = argument.slice(2, equals < 0 ? undefined : equals)
    const apply = Object.hasOwn(OPTIONS, name) ? OPTIONS[name] : undefined
    // Named alone: a message that listed the options taken would name them as refused too.
    if (apply === undefined) throw new ServerFlagError(`unrecognized option '${argument}': the example service does not take it`)
    let value: string
    if (equals >= 0) {
      value = argument.slice(equals + 1)
    } else {
      if (index + 1 >= args.length) throw new ServerFlagError(`option '${argument}' requires an argument`)
      value = args[++index]
    }
    try {
      apply(state, value)
    } catch (error) {
      throw new ServerFlagError(`Bad option: "--${name}".\n${(error as Error).message}`)
    }
  }
  if (others.length > 0) throw new ServerFlagError(`Unexpected argument: ${others[0]}`)
  return finish(state)
}
