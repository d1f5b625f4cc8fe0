/**
 * Triton's trace settings (its trace extension): the values the server started with, the global
 * settings a client changed, and each model's own, a model falling back to the global ones for
 * what it does not set, and the global ones to the start values (a `null` clears a setting).
 * Transport-neutral: both faces read their requests into a `TraceChange` with the parsers here,
 * in Triton's words. The settings live in the table's store: with a shared registry, a change
 * made through one process applies in every process of the service.
 */
import * as errors from '../errors'
import type { ModelStore } from '../store/model-store'

/** The levels that trace something; none is Triton's `OFF`. */
export type TraceLevelName = 'TIMESTAMPS' | 'TENSORS'

/** How the server traces (Triton's `trace_mode`): `triton` writes trace files, `opentelemetry`
 * starts spans through the host's OpenTelemetry API (trace-spans.ts). */
export type TraceMode = 'triton' | 'opentelemetry'

/** One setting's values, as Triton answers them. */
export interface TraceValues {
  /** In Triton's order; empty: `OFF`. */
  readonly level: readonly TraceLevelName[]
  /** One request in `rate` is traced (0: none). */
  readonly rate: number
  /** Traces left to take (-1: no limit). */
  readonly count: number
  /** Traces written together (0: as they come). */
  readonly logFrequency: number
  readonly file: string
  readonly mode: TraceMode
}

/** The settings a client may change. */
export type ChangeableSetting = 'level' | 'rate' | 'count' | 'logFrequency'

/** What a setting sets itself; the rest falls back. */
export type TraceOverrides = Partial<Pick<TraceValues, ChangeableSetting>>

/** A request's change: a value sets, `null` clears (falls back), absent leaves as is. */
export type TraceChange = { [Setting in ChangeableSetting]?: TraceValues[Setting] | null }

/** The settings clients changed, as the store keeps them. */
export interface TraceState {
  global: TraceOverrides
  models: Record<string, TraceOverrides>
}

/** The trace options of a model table: the settings it starts with (Triton's `--trace-config`). */
export interface TraceOptions {
  /** Default `[]` (OFF). */
  level?: TraceLevelName[]
  /** Default 1000. */
  rate?: number
  /** Default -1. */
  count?: number
  /** Default 0. */
  logFrequency?: number
  /** Where traces are appended; default none (tracing cannot be turned on without one). */
  file?: string
  /** Default `triton`. Not changed by clients, as in Triton. */
  mode?: TraceMode
  /** Loads @opentelemetry/api in `opentelemetry` mode (default `require`): a stand-in for tests. */
  load?: (name: string) => unknown
}

export const DEFAULT_TRACE_VALUES: TraceValues = { level: [], rate: 1000, count: -1, logFrequency: 0, file: '', mode: 'triton' }

const LEVELS: readonly TraceLevelName[] = ['TIMESTAMPS', 'TENSORS']
const INT32_MAX = 2 ** 31 - 1
const UINT32_MAX = 2 ** 32 - 1
const CHANGEABLE: readonly ChangeableSetting[] = ['level', 'rate', 'count', 'logFrequency']

/** Triton's names of the settings. */
export const SETTING_NAMES: Record<ChangeableSetting, string> = {
  level: 'trace_level', rate: 'trace_rate', count: 'trace_count', logFrequency: 'log_frequency'
}

/** The settings' values as Triton answers them, in its order. */
export function traceSettingsResponse ({ level, rate, count, logFrequency, file, mode }: TraceValues): Record<string, string | string[]> {
  return {
    trace_level: level.length === 0 ? ['OFF'] : [...level],
    trace_rate: String(rate),
    trace_count: String(count),
    log_frequency: String(logFrequency),
    trace_file: file,
    trace_mode: mode
  }
}

/** `trace_level`'s values, read as Triton reads them: `OFF` alone, or any of the levels; other
 * names are ignored, and none at all leaves the level as it is (undefined). */
export function parseTraceLevel (names: readonly string[]): TraceLevelName[] | undefined {
  if (names.includes('OFF')) {
    if (names.length > 1) throw errors.traceLevelOffAlone()
    return []
  }
  const level = LEVELS.filter((name) => names.includes(name))
  return level.length === 0 ? undefined : level
}

/** A number read as Triton's `std::stoi` reads it: its leading integer, after white space. */
function stoi (setting: string, text: string, min: number, max: number): number {
  const match = /^[\t\n\v\f\r ]*([+-]?\d+)/.exec(text)
  if (match === null) throw errors.unparsableTraceSetting(setting, text)
  const value = Number(match[1])
  if (value < -INT32_MAX - 1 || value > INT32_MAX) throw errors.traceSettingOutOfRange(setting, min, max, text)
  return value
}

/** A setting's text, read as Triton reads it over `transport`. */
export function parseTraceNumber (setting: Exclude<ChangeableSetting, 'level'>, text: string, transport: 'http' | 'grpc'): number {
  const name = SETTING_NAMES[setting]
  if (setting === 'count') {
    const count = stoi(name, text, -1, INT32_MAX)
    if (count < -1) throw errors.traceCountTooSmall(text, transport)
    return count
  }
  // An unsigned setting in Triton: a negative one wraps around, as its assignment does.
  return stoi(name, text, 0, UINT32_MAX) >>> 0
}

/** Why `values` trace nothing (Triton's reason; empty with a count of 0), or undefined. Spans
 * need no file. */
function invalidReason ({ level, rate, count, file, mode }: TraceValues): string | undefined {
  if (level.length === 0) return 'tracing is disabled'
  if (rate === 0) return 'sample rate must be non-zero'
  if (mode === 'triton' && file === '') return 'trace file name is not given'
  return count === 0 ? '' : undefined
}

/** One setting in use: its values, and its sampling (every request that reaches it counts). */
export class TraceSampler {
  readonly values: TraceValues
  /** The traces it may still take (-1: no limit). */
  remaining: number
  /** Whether a request may be traced whatever the rate and count: in `opentelemetry` mode, while
   * the level is on (Triton traces every request that carries its client's trace context). */
  readonly forcible: boolean
  #seen = 0

  constructor (values: TraceValues) {
    this.values = values
    this.remaining = invalidReason(values) === undefined ? values.count : 0
    this.forcible = values.mode === 'opentelemetry' && values.level.length > 0
  }

  /** The requests it counted: those that reached it while it could trace them. */
  get seen (): number {
    return this.#seen
  }

  /** Whether the request now reaching it is traced: one in `rate`, while traces remain, or
   * `forced` (as Triton's `SampleTrace`: a forced request still counts towards the rate, and takes
   * a trace of the count when it falls on the rate; a rate of 0 traces forced requests only). */
  sample (forced = false): boolean {
    const force = forced && this.forcible
    if (this.values.rate === 0 || (this.remaining === 0 && !force)) return force
    if (++this.#seen % this.values.rate !== 0 || this.remaining === 0) return force
    if (this.remaining > 0) this.remaining--
    return true
  }
}

function applyChange (current: TraceOverrides | undefined, change: TraceChange): TraceOverrides {
  const next: Record<string, unknown> = { ...current }
  for (const setting of CHANGEABLE) {
    const value = change[setting]
    if (value === null) delete next[setting]
    else if (value !== undefined) next[setting] = value
  }
  return next as TraceOverrides
}

const isEmpty = (overrides: TraceOverrides) => Object.keys(overrides).length === 0

function parseState (text: string | undefined): TraceState {
  return text === undefined ? { global: {}, models: {} } : JSON.parse(text) as TraceState
}

export class TraceSettings {
  readonly #start: TraceValues
  readonly #letGo: ((samplers: TraceSampler[]) => void) | undefined
  #store: ModelStore
  /** The store's trace version applied here. */
  #seen: number
  #global: TraceSampler
  readonly #models = new Map<string, TraceSampler>()
  /** Whether any setting traces: while none does, a request costs one check. */
  #tracing = false

  /** `letGo` is told of the settings replaced by a change (Triton writes what they keep). */
  constructor (store: ModelStore, options: TraceOptions = {}, letGo?: (samplers: TraceSampler[]) => void) {
    this.#start = { ...DEFAULT_TRACE_VALUES, ...options, level: parseTraceLevel(options.level ?? []) ?? [] }
    this.#letGo = letGo
    this.#store = store
    this.#seen = Number.NaN
    this.#global = new TraceSampler(this.#start)
    this.#sync()
  }

  /** Keeps the settings in `store` from now on (a shared registry's), and applies what it holds. */
  attach (store: ModelStore): void {
    this.#store = store
    this.#seen = Number.NaN
    this.#sync()
  }

  /** Applies the settings another process changed since the last call (cheap when none). */
  #sync (): void {
    const text = this.#store.traceState()
    if (this.#store.traceVersion === this.#seen) return
    this.#seen = this.#store.traceVersion
    this.#use(parseState(text))
  }

  #use (state: TraceState): void {
    this.#letGo?.([this.#global, ...this.#models.values()])
    const global = this.#valuesOf(state, undefined)
    this.#global = new TraceSampler(global)
    this.#models.clear()
    for (const name of Object.keys(state.models)) this.#models.set(name, new TraceSampler(this.#valuesOf(state, name)))
    this.#tracing = [this.#global, ...this.#models.values()].some((sampler) => sampler.remaining !== 0 || sampler.forcible)
  }

  #valuesOf (state: TraceState, model: string | undefined): TraceValues {
    const global = { ...this.#start, ...state.global }
    return model === undefined ? global : { ...global, ...state.models[model] }
  }

  /** The setting in use for `model` (the global one without a name, or for a model that sets none). */
  #samplerOf (model: string | undefined): TraceSampler {
    return (model === undefined ? undefined : this.#models.get(model)) ?? this.#global
  }

  /** The values of the setting of `model` (default: the global one), with the traces it may still take. */
  values (model?: string): TraceValues {
    this.#sync()
    const { values, remaining } = this.#samplerOf(model)
    return { ...values, count: invalidReason(values) === undefined ? remaining : values.count }
  }

  /**
   * Changes the setting of `model` (default: the global one) for every process of the service,
   * and returns its values. A setting that would trace nothing while its level is on is refused
   * (Triton's `Attempting to set invalid trace setting`), as is a global change that would leave
   * such a model: nothing changes then.
   */
  update (model: string | undefined, change: TraceChange): TraceValues {
    this.#store.changeTraceState((text) => {
      const state = parseState(text)
      const next: TraceState = { global: state.global, models: { ...state.models } }
      if (model === undefined) {
        next.global = applyChange(state.global, change)
      } else {
        const overrides = applyChange(state.models[model], change)
        if (isEmpty(overrides)) delete next.models[model]
        else next.models[model] = overrides
      }
      const changed = model === undefined ? [undefined, ...Object.keys(next.models)] : [model]
      for (const name of changed) {
        const values = this.#valuesOf(next, name)
        const reason = invalidReason(values)
        if (reason !== undefined && values.level.length > 0) throw errors.invalidTraceSetting(reason)
      }
      return JSON.stringify(next)
    })
    return this.values(model)
  }

  /** Whether any setting may trace a request now (cheap: while none does, a request is not
   * looked at further). */
  mayTrace (): boolean {
    if (this.#store.traceVersion !== this.#seen) this.#sync()
    return this.#tracing
  }

  /** The setting that traces a request for `model` now reaching the server, if it is traced;
   * `forced`: the request carries its client's trace context (see `TraceSampler.sample`). */
  sample (model: string, forced = false): TraceSampler | undefined {
    if (!this.mayTrace()) return undefined
    const sampler = this.#samplerOf(model)
    return sampler.sample(forced) ? sampler : undefined
  }
}
