/**
 * The model table's side of a shared registry's store (see model-store.ts): each model version
 * has a slot, the same in every process (a row of `model_slots`, taken once, when a process first
 * serves the version), naming its blocks in the statistics table beside the store; the model
 * repository's state is a row of `models` per model that a load or unload request changed,
 * announced to every process through the lease table's revision, as the region records are; a
 * setting of the service (the logging extension's) is a row of `settings`, its value as JSON.
 */
import * as errors from '../errors'
import type { LoadOverrides, ModelRecord, ModelStore, NewModelRecord, ServicePeers, VersionCells } from './model-store'
import { SEQUENCE_SCHEMA } from './service-peers'
import type { Database, Statement } from './sqlite-driver'
import { MODEL_SLOTS, StatisticsTable } from './statistics-table'

export const MODEL_SCHEMA = `
  CREATE TABLE IF NOT EXISTS model_slots (
    name TEXT NOT NULL,
    version TEXT NOT NULL,
    slot INTEGER NOT NULL UNIQUE,
    PRIMARY KEY (name, version)
  );
  CREATE TABLE IF NOT EXISTS models (
    name TEXT PRIMARY KEY,
    loaded INTEGER NOT NULL,
    generation INTEGER NOT NULL,
    reason TEXT NOT NULL,
    -- JSON: {"config"?: string, "files": {"file:<version>/<name>": base64}}, or NULL.
    overrides TEXT
  );
  CREATE TABLE IF NOT EXISTS settings (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL
  );
  ${SEQUENCE_SCHEMA}
  -- The trace settings clients changed: one row, JSON (see lib/models/trace-settings.ts).
  CREATE TABLE IF NOT EXISTS trace_settings (
    id INTEGER PRIMARY KEY CHECK (id = 0),
    state TEXT NOT NULL
  );
`

/** Empties what a service that starts again must not find. */
export const CLEAR_MODELS = 'DELETE FROM model_slots; DELETE FROM models; DELETE FROM settings; DELETE FROM sequences; DELETE FROM trace_settings'

/** What the shared store lends this one. */
export interface SharedStoreContext {
  readonly db: Database
  readonly statisticsPath: string
  /** This process's slot among the store's users. */
  readonly processSlot: number
  /** The store's transaction: a write in it is announced to every process once committed. */
  transaction<T>(change: () => T): T
  /** Marks the current transaction as one that wrote. */
  wrote(): void
  /** A read of the store, its failures answered as the store's. */
  read<T>(use: () => T): T
  /** The lease table's revision, bumped around every change. */
  revision(): number
  /** The slots of the processes alive now, this one's included. */
  liveProcessSlots(): number[]
  /** The other processes of the service. */
  readonly peers: ServicePeers
}

interface ModelRow { name: string, loaded: number, generation: number, reason: string, overrides: string | null }

interface StoredOverrides { config?: string, files: Record<string, string> }

function encode ({ config, files }: LoadOverrides): string {
  const stored: StoredOverrides = { ...(config !== undefined && { config }), files: {} }
  for (const [name, bytes] of Object.entries(files)) stored.files[name] = Buffer.from(bytes).toString('base64')
  return JSON.stringify(stored)
}

function decode (text: string): LoadOverrides {
  const { config, files } = JSON.parse(text) as StoredOverrides
  const decoded: Record<string, Uint8Array> = {}
  for (const [name, base64] of Object.entries(files)) decoded[name] = Buffer.from(base64, 'base64')
  return { ...(config !== undefined && { config }), files: decoded }
}

const toRecord = ({ name, loaded, generation, reason, overrides }: ModelRow): ModelRecord =>
  ({ name, loaded: loaded === 1, generation, reason, ...(overrides !== null && { overrides: decode(overrides) }) })

export class SqliteModelStore implements ModelStore {
  readonly shared = true
  readonly #context: SharedStoreContext
  readonly #statements: ReturnType<typeof prepare>
  #table: StatisticsTable | undefined
  readonly #cells = new Map<string, VersionCells>()
  #records: ReadonlyMap<string, ModelRecord> = new Map()
  #revision = Number.NaN
  readonly #listeners: Array<() => void> = []
  #open = true
  version = 0
  #traceState: string | undefined
  traceVersion = 0

  constructor (context: SharedStoreContext) {
    this.#context = context
    this.#statements = prepare(context.db)
  }

  get peers (): ServicePeers {
    return this.#context.peers
  }

  cells (name: string, version: string): VersionCells {
    const key = `${version}:${name}`
    let cells = this.#cells.get(key)
    if (cells === undefined) {
      const slot = this.#slotOf(name, version)
      const table = this.#table ??= new StatisticsTable(this.#context.statisticsPath)
      const own = table.own(this.#context.processSlot, slot)
      cells = {
        own,
        all: () => table.blocks(slot),
        live: () => table.blocks(slot, this.#liveProcessSlots())
      }
      this.#cells.set(key, cells)
    }
    return cells
  }

  /** The processes alive now; only this one if the store cannot say (its gauges are then this
   * process's alone, not the stale ones of processes that may be dead). */
  #liveProcessSlots (): number[] {
    try {
      return this.#context.read(() => this.#context.liveProcessSlots())
    } catch {
      return [this.#context.processSlot]
    }
  }

  /** The version's slot: the one a process gave it first, or the lowest free one. */
  #slotOf (name: string, version: string): number {
    return this.#context.transaction(() => {
      const known = this.#statements.slotOf.get(name, version) as number | undefined
      if (known !== undefined) return known
      const used = new Set(this.#statements.slots.all() as number[])
      let slot = 0
      while (used.has(slot)) slot++
      if (slot >= MODEL_SLOTS) throw errors.tooManySharedModelVersions(MODEL_SLOTS, name, version)
      this.#statements.addSlot.run(name, version, slot)
      return slot
    })
  }

  /** A store that cannot be read (damaged, busy past its timeout) leaves the records as they were
   * read last, until the next change or check: requests that use no shared memory go on being
   * served (the registry's own check logs what is wrong). */
  records (): ReadonlyMap<string, ModelRecord> {
    if (!this.#open) return this.#records
    const revision = this.#context.revision()
    if (revision === this.#revision) return this.#records
    try {
      this.#context.read(() => this.#reread())
    } catch {
      this.#revision = revision
    }
    return this.#records
  }

  #reread (): void {
    // The revision first: a change made while reading bumps it again, and is read next time.
    const revision = this.#context.revision()
    const rows = this.#statements.models.all() as ModelRow[]
    const traceState = this.#statements.traceState.get() as string | undefined
    this.#revision = revision
    if (traceState !== this.#traceState) {
      this.#traceState = traceState
      this.traceVersion++
    }
    const records = new Map(rows.map((row) => [row.name, toRecord(row)]))
    if (!sameRecords(records, this.#records)) {
      this.#records = records
      this.version++
    }
  }

  write (name: string, { loaded, reason, overrides }: NewModelRecord): ModelRecord {
    this.#context.transaction(() => {
      const generation = ((this.#statements.generationOf.get(name) as number | undefined) ?? 0) + (loaded ? 1 : 0)
      this.#statements.setModel.run(name, loaded ? 1 : 0, generation, reason, overrides === undefined ? null : encode(overrides))
      this.#context.wrote()
    })
    return this.records().get(name) as ModelRecord
  }

  setting (name: string): unknown {
    const value = this.#context.read(() => this.#statements.setting.get(name) as string | undefined)
    return value === undefined ? undefined : JSON.parse(value)
  }

  changeSetting<T> (name: string, change: (current: T | undefined) => T): T {
    return this.#context.transaction(() => {
      const value = this.#statements.setting.get(name) as string | undefined
      const changed = change(value === undefined ? undefined : JSON.parse(value))
      this.#statements.setSetting.run(name, JSON.stringify(changed))
      this.#context.wrote()
      return changed
    })
  }

  traceState (): string | undefined {
    this.records()
    return this.#traceState
  }

  changeTraceState (change: (current: string | undefined) => string): void {
    this.#context.transaction(() => {
      this.#statements.setTraceState.run(change(this.#statements.traceState.get() as string | undefined))
      this.#context.wrote()
    })
    this.records()
  }

  onCheck (listener: () => void): void {
    this.#listeners.push(listener)
  }

  /** Run at each of the store's checks: the records are read again from the file (a writer may
   * have died between its commit and its announcement), then the listeners apply them. */
  checked (): void {
    this.#revision = Number.NaN
    for (const listener of this.#listeners) {
      try {
        listener()
      } catch {
        // The store failed: the registry's own check logs it, and the next check tries again.
      }
    }
  }

  close (): void {
    this.#open = false
    this.#table?.close()
  }
}

/** Records compared by what a process applies of them. */
function sameRecords (a: ReadonlyMap<string, ModelRecord>, b: ReadonlyMap<string, ModelRecord>): boolean {
  if (a.size !== b.size) return false
  for (const [name, record] of a) {
    const other = b.get(name)
    if (other === undefined || other.loaded !== record.loaded || other.generation !== record.generation || other.reason !== record.reason) return false
  }
  return true
}

function prepare (db: Database) {
  const statement = (sql: string): Statement => db.prepare(sql)
  return {
    slotOf: statement('SELECT slot FROM model_slots WHERE name = ? AND version = ?').pluck(),
    slots: statement('SELECT slot FROM model_slots').pluck(),
    addSlot: statement('INSERT INTO model_slots (name, version, slot) VALUES (?, ?, ?)'),
    models: statement('SELECT name, loaded, generation, reason, overrides FROM models'),
    generationOf: statement('SELECT generation FROM models WHERE name = ?').pluck(),
    setModel: statement('INSERT OR REPLACE INTO models (name, loaded, generation, reason, overrides) VALUES (?, ?, ?, ?, ?)'),
    setting: statement('SELECT value FROM settings WHERE name = ?').pluck(),
    setSetting: statement('INSERT OR REPLACE INTO settings (name, value) VALUES (?, ?)'),
    traceState: statement('SELECT state FROM trace_settings WHERE id = 0').pluck(),
    setTraceState: statement('INSERT OR REPLACE INTO trace_settings (id, state) VALUES (0, ?)')
  }
}
