/**
 * Triton's logging extension (`GET/POST /v2/logging`, gRPC `LogSettings`) over the app's own
 * logger: Triton's six settings, kept as Triton reports them, with the logger's level set from
 * them. Triton switches info, warning and error on and off one by one and adds verbose levels
 * below them; a pino logger has one threshold, so it takes the lowest level switched on
 * (`pinoLevelOf`). `log_file` is whatever the service was started with: Triton refuses to change
 * it over the network, and so does this. `log_format` is taken and reported as Triton's; the
 * logger's own line format stays the host's (docs/logging.md).
 *
 * With a shared registry (`serveWith`) the settings are the whole service's: a change in one
 * process is read by every other at its next logging call, and applied to its logger at the
 * store's next check.
 */
import type { SystemSharedMemoryRegistry } from '../../types'
import type { LogFormat, LogSettings, LogSettingsUpdate } from '../../types/logging'
import * as errors from '../errors'
import { Registry } from '../registry/registry'
import type { ModelStore } from '../store/model-store'

export type { LogFormat, LogSettings, LogSettingsUpdate }

/** What the extension needs of a logger: pino's level, read and set by name. */
export interface LevelledLogger {
  level: string
}

/** Triton's formats: its default (`I0520 20:03:25.829575 ...`) and ISO 8601 timestamps. */
export const LOG_FORMATS: readonly LogFormat[] = ['default', 'ISO8601']

export const isLogFormat = (value: string): value is LogFormat => (LOG_FORMATS as readonly string[]).includes(value)

/** The largest verbose level taken: what gRPC's `uint32_param` carries. */
export const MAX_VERBOSE_LEVEL = 2 ** 32 - 1

/** Triton's settings at startup without logging flags. */
export const TRITON_LOG_SETTINGS: Readonly<LogSettings> = Object.freeze({
  file: '', info: true, warning: true, error: true, verboseLevel: 0, format: 'default'
})

/** The store's name of the settings. */
const SETTING = 'logging'

/** pino's levels, lowest first, with what each lets through in Triton's terms. */
const PINO_LEVELS: ReadonlyArray<[string, Pick<LogSettings, 'info' | 'warning' | 'error' | 'verboseLevel'>]> = [
  ['trace', { info: true, warning: true, error: true, verboseLevel: 2 }],
  ['debug', { info: true, warning: true, error: true, verboseLevel: 1 }],
  ['info', { info: true, warning: true, error: true, verboseLevel: 0 }],
  ['warn', { info: false, warning: true, error: true, verboseLevel: 0 }],
  ['error', { info: false, warning: false, error: true, verboseLevel: 0 }],
  ['fatal', { info: false, warning: false, error: false, verboseLevel: 0 }],
  ['silent', { info: false, warning: false, error: false, verboseLevel: 0 }]
]

/**
 * The pino level of `settings`: the lowest level they switch on. Verbose level 1 is `debug`, 2
 * and above `trace`; with everything off, `fatal` (Triton has no switch for its fatal errors).
 */
export function pinoLevelOf ({ info, warning, error, verboseLevel }: LogSettings): string {
  if (verboseLevel >= 2) return 'trace'
  if (verboseLevel === 1) return 'debug'
  if (info) return 'info'
  if (warning) return 'warn'
  return error ? 'error' : 'fatal'
}

/** The settings a logger at `level` has: Triton's defaults for a level pino does not define. */
function settingsOfLevel (level: string): LogSettings {
  const known = PINO_LEVELS.find(([name]) => name === level)
  return { ...TRITON_LOG_SETTINGS, ...known?.[1] }
}

/** The settings a change leaves: `log_file` cannot be changed, whatever its value. */
function changed (current: LogSettings, update: LogSettingsUpdate): LogSettings {
  if (update.file !== undefined) throw errors.logFileUnsupported()
  const { info = current.info, warning = current.warning, error = current.error, verboseLevel = current.verboseLevel, format = current.format } = update
  return { file: current.file, info, warning, error, verboseLevel, format }
}

export class ServerLogging {
  readonly #logger: LevelledLogger
  /** This process's settings: the ones it started with, then the last ones it applied. */
  #settings: LogSettings
  #store: ModelStore | undefined

  /**
   * The extension over `logger` (the app's: `app.log`). Settings not given in `initial` are read
   * from the logger's level (`file` empty, `format` `default`); when `initial` sets a level, the
   * logger is set to it now.
   */
  constructor (logger: LevelledLogger, initial: Partial<LogSettings> = {}) {
    this.#logger = logger
    this.#settings = { ...settingsOfLevel(logger.level), ...initial }
    const setsLevel = ['info', 'warning', 'error', 'verboseLevel'].some((name) => Object.hasOwn(initial, name))
    if (setsLevel) logger.level = pinoLevelOf(this.#settings)
  }

  /** The current settings (the service's, with a shared registry), applied to the logger. */
  settings (): LogSettings {
    return this.#apply(this.#shared())
  }

  /** Applies `update` (all of it, or nothing: a refused setting changes none) and returns the
   * settings it leaves; with a shared registry, for every process. */
  update (update: LogSettingsUpdate): LogSettings {
    if (Object.keys(update).length === 0) return this.settings()
    const store = this.#store
    if (store === undefined) return this.#apply(changed(this.#settings, update))
    return this.#apply(store.changeSetting<LogSettings>(SETTING, (current) => changed(current ?? this.#settings, update)))
  }

  /** Shares the settings through `registry`'s store, when other processes share it. */
  serveWith (registry: SystemSharedMemoryRegistry): void {
    if (!(registry instanceof Registry) || this.#store !== undefined) return
    const store = registry.modelStore()
    if (!store.shared) return
    this.#store = store
    // A process that serves no logging call still takes the others' changes.
    store.onCheck(() => this.settings())
  }

  /** The store's settings, or this process's before any change. */
  #shared (): LogSettings {
    return (this.#store?.setting(SETTING) as LogSettings | undefined) ?? this.#settings
  }

  #apply (settings: LogSettings): LogSettings {
    this.#settings = settings
    // A level that says the same already stays: `silent` for everything off, or a custom level.
    const level = pinoLevelOf(settings)
    if (pinoLevelOf(settingsOfLevel(this.#logger.level)) !== level) this.#logger.level = level
    return { ...settings }
  }
}
