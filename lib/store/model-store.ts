/**
 * What the model table keeps where every process of a service sees it: each model version's
 * statistics cells (see statistics-table.ts for their layout), the model repository's state
 * (which models a load or an unload request left loaded or not), and the service's settings
 * changed at run time (the logging extension's). Two stores: the table's own, in this process
 * (the default), and a shared registry's (sqlite-model-store.ts).
 */
import type { ModelLoadOverrides } from '../../types/models'
import type { CallOptions, ChannelMessage, IncomingCall } from './process-channel'
import { BLOCK_CELLS } from './statistics-table'

/** The statistics cells of one model version. */
export interface VersionCells {
  /** This process's cells, which it alone writes. */
  readonly own: Float64Array
  /** The cells of every process that served the version, this one's included, dead ones too. */
  all(): Float64Array[]
  /** The cells of the processes alive now (a gauge of a dead process is not current). */
  live(): Float64Array[]
}

export type LoadOverrides = ModelLoadOverrides

/** A model's state after the last load or unload request (models never asked about have none). */
export interface ModelRecord {
  readonly name: string
  readonly loaded: boolean
  /** Counts the loads that succeeded: a process that applied an older one loads again. */
  readonly generation: number
  /** Why an unloaded model is not loaded: `unloaded`, or the failure of its last load. */
  readonly reason: string
  /** What the last load asked for, if anything beyond the name. */
  readonly overrides?: LoadOverrides
}

export type NewModelRecord = Omit<ModelRecord, 'name' | 'generation'>

/** A sequence, as the service knows it: its model version, and its correlation id as a key. */
export interface SequenceKey {
  model: string
  version: string
  id: string
}

/** Answers a call of another process and returns true, or returns false: the call is not for it. */
export type CallTaker = (call: IncomingCall) => boolean

/**
 * The other processes of the service that share a store: the owner of each sequence (the process
 * that started it, where its state lives), and calls to a process (process-channel.ts). Processes
 * are named by their row among the store's users, never reused.
 */
export interface ServicePeers {
  /** This process. */
  readonly self: number
  /** Adds a handler of the other processes' calls (each model table of this process has one):
   * the first to take a call answers it; a call none takes ends with an empty reply. */
  serve(handler: CallTaker): void
  /** The other processes alive now (those that answer no calls fail theirs at once). */
  others(): number[]
  /** Calls a process: rejects with a `PeerGoneError` if it is gone, or answers no calls. */
  call(process: number, message: ChannelMessage, options?: CallOptions): Promise<ChannelMessage>
  /** The live process that owns a sequence, if any (this one included). */
  sequenceOwner(sequence: SequenceKey): number | undefined
  /** Takes a sequence for this process unless a live one owns it: returns its owner. */
  claimSequence(sequence: SequenceKey): number
  /** Gives up a sequence this process owns (it ended, or was released). */
  dropSequence(sequence: SequenceKey): void
  /** Gives up every sequence this process owns. */
  dropSequences(): void
}

export interface ModelStore {
  /** Whether other processes share this store. */
  readonly shared: boolean
  cells(name: string, version: string): VersionCells
  /** The current records by name: a shared store first checks, cheaply, whether another process
   * changed them. */
  records(): ReadonlyMap<string, ModelRecord>
  /** Changes whenever `records()` would return different records. */
  readonly version: number
  /** Records a model's new state for every process (a load bumps its generation). */
  write(name: string, record: NewModelRecord): ModelRecord
  /** Calls `listener` now and then while the store is open, so that a process that serves no
   * request still applies other processes' loads and unloads. */
  onCheck(listener: () => void): void
  /** The other processes of the service, when they share this store. */
  readonly peers?: ServicePeers
  /** A setting of the whole service, by name, as its last change left it (undefined before any). */
  setting(name: string): unknown
  /** Changes a setting for every process in one step: `change` gets its current value and
   * returns the new one (a throw changes nothing). */
  changeSetting<T>(name: string, change: (current: T | undefined) => T): T
  /** The trace settings clients changed (JSON), if any: a shared store first checks, cheaply,
   * whether another process changed them. */
  traceState(): string | undefined
  /** Changes whenever `traceState()` would return another text. */
  readonly traceVersion: number
  /** Replaces the trace settings with what `change` makes of the current ones, for every process
   * (atomically in a shared store: a throw of `change` changes nothing). */
  changeTraceState(change: (current: string | undefined) => string): void
}

/** A table's own store: its cells and records in this process. */
export class MemoryModelStore implements ModelStore {
  readonly shared = false
  readonly #cells = new Map<string, VersionCells>()
  readonly #records = new Map<string, ModelRecord>()
  version = 0
  #traceState: string | undefined
  traceVersion = 0

  cells (name: string, version: string): VersionCells {
    const key = `${version}:${name}`
    let cells = this.#cells.get(key)
    if (cells === undefined) {
      const own = new Float64Array(BLOCK_CELLS)
      this.#cells.set(key, cells = { own, all: () => [own], live: () => [own] })
    }
    return cells
  }

  records (): ReadonlyMap<string, ModelRecord> {
    return this.#records
  }

  write (name: string, record: NewModelRecord): ModelRecord {
    const generation = (this.#records.get(name)?.generation ?? 0) + (record.loaded ? 1 : 0)
    const written = { name, generation, ...record }
    this.#records.set(name, written)
    this.version++
    return written
  }

  onCheck (): void {}

  readonly #settings = new Map<string, unknown>()

  setting (name: string): unknown {
    return this.#settings.get(name)
  }

  changeSetting<T> (name: string, change: (current: T | undefined) => T): T {
    const changed = change(this.#settings.get(name) as T | undefined)
    this.#settings.set(name, changed)
    return changed
  }

  traceState (): string | undefined {
    return this.#traceState
  }

  changeTraceState (change: (current: string | undefined) => string): void {
    this.#traceState = change(this.#traceState)
    this.traceVersion++
  }
}
