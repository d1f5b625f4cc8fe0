/**
 * The shared store: one SQLite file (WAL mode) that every process of a service opens, so they all
 * see one registry. The file holds the records and the processes using it (pid and start time,
 * so that those that died are recognised); who holds leases is counted in a lease table in shared
 * memory beside it (`<path>-leases`), so a request writes nothing to the file.
 */
import { closeSync, constants, openSync, rmSync } from 'node:fs'
import path from 'node:path'
import type { SharedRegistryOptions } from '../../types'
import { storeFailed, storeOpenFailed } from '../errors'
import { optionalPeer } from '../util/optional-peer'
import { LeaseTable, PROCESS_SLOTS, REGION_SLOTS } from './lease-table'
import { isAlive, thisProcess } from './process-identity'
import type { NewRegion, RegionRecord, RegionStore } from './region-store'
import type { Database, DatabaseConstructor, Statement } from './sqlite-driver'
import { SqliteServicePeers } from './service-peers'
import { CLEAR_MODELS, MODEL_SCHEMA, SqliteModelStore } from './sqlite-model-store'
import { StatisticsTable } from './statistics-table'

export const DEFAULT_BUSY_TIMEOUT_MS = 5000
export const DEFAULT_CHECK_INTERVAL_MS = 1000

const LEASE_TABLE_SHRUNK = 'the lease table beside the store was shrunk: leases in other processes no longer count here, ' +
  'and registering or unregistering is refused until every process of the service has restarted'

const SCHEMA = `
  CREATE TABLE IF NOT EXISTS regions (
    -- AUTOINCREMENT: an id is never used twice, even after the newest record is removed.
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL UNIQUE,
    key TEXT NOT NULL,
    offset INTEGER NOT NULL,
    byte_size INTEGER NOT NULL,
    -- '' for a record written by an earlier version: it matches no object (see createSchema).
    object TEXT NOT NULL DEFAULT '',
    unregister_pending INTEGER NOT NULL DEFAULT 0,
    slot INTEGER NOT NULL UNIQUE
  );
  CREATE TABLE IF NOT EXISTS users (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    pid INTEGER NOT NULL,
    start_time INTEGER NOT NULL,
    slot INTEGER NOT NULL
  );
`

interface RegionRow { id: number, name: string, key: string, offset: number, byte_size: number, object: string, unregister_pending: number, slot: number }
interface UserRow { id: number, pid: number, start_time: number, slot: number }

const toRecord = (row: RegionRow): RegionRecord => ({
  id: row.id,
  name: row.name,
  key: row.key,
  offset: row.offset,
  byteSize: row.byte_size,
  object: row.object,
  unregisterPending: row.unregister_pending === 1
})

/** Creates the file readable and writable by its owner only (SQLite gives its WAL files the same
 * mode); an existing file is opened as it is. Never follows a symbolic link. */
function createPrivately (path: string): void {
  closeSync(openSync(path, constants.O_RDWR | constants.O_CREAT | constants.O_NOFOLLOW, 0o600))
}

/** How long a process opening the store pauses between tries to turn its write-ahead log on. */
const WAL_RETRY_MS = 10
const pause = new Int32Array(new SharedArrayBuffer(4))

/** Turns the write-ahead log on (it stays on in the file). Processes opening a new store together
 * each hold a read lock and want the write lock to convert the file: SQLite answers all but one
 * SQLITE_BUSY at once, without waiting (waiting could deadlock), so this tries again until the
 * busy timeout has passed. The others find the log on, which needs only a read. */
function useWriteAheadLog (db: Database, busyTimeoutMs: number): void {
  const giveUpAt = Date.now() + busyTimeoutMs
  for (;;) {
    try {
      db.pragma('journal_mode = WAL')
      return
    } catch (error) {
      if ((error as { code?: unknown }).code !== 'SQLITE_BUSY' || Date.now() >= giveUpAt) throw error
      Atomics.wait(pause, 0, 0, WAL_RETRY_MS)
    }
  }
}

/** Creates the tables, or brings an existing store's up to date. A store made before regions
 * recorded their object gains the column: a record without one (written by an earlier version
 * still running) matches no object, so only the processes that mapped it at registration serve it. */
function createSchema (db: Database): void {
  db.exec(SCHEMA)
  db.exec(MODEL_SCHEMA)
  const columns = db.prepare("SELECT name FROM pragma_table_info('regions')").pluck().all()
  if (!columns.includes('object')) db.exec("ALTER TABLE regions ADD COLUMN object TEXT NOT NULL DEFAULT ''")
}

/** The lowest slot not in `used`. */
function freeSlot (used: Iterable<number>, slots: number): number | undefined {
  const taken = new Set(used)
  for (let slot = 0; slot < slots; slot++) if (!taken.has(slot)) return slot
  return undefined
}

export class SqliteStore implements RegionStore {
  readonly maxRegions = REGION_SLOTS
  readonly #db: Database
  readonly #statements: ReturnType<typeof prepare>
  readonly #checkIntervalMs: number
  #userId = 0
  #slot = 0
  #leases!: LeaseTable
  readonly #leaseTablePath: string
  readonly #statisticsPath: string
  /** Where each process that serves models answers the others' calls: `<id>`, a socket per user row. */
  readonly #channelsPath: string
  #peers: SqliteServicePeers | undefined
  /** The model table's side of the store, made when a model table first uses it. */
  #models: SqliteModelStore | undefined
  #records: ReadonlyMap<string, RegionRecord> = new Map()
  /** Region slots by record id. */
  #regionSlots = new Map<number, number>()
  /** The region slot of each record this process holds leases on, by record id: the record may be
   * gone from the store by the time its last lease here ends. */
  readonly #holding = new Map<number, number>()
  /** Damaged lease counters found since the last check, which reports them. */
  #damaged: string[] = []
  /** The lease table's revision when the records were last read. */
  #revision = Number.NaN
  /** Set by a write in the current transaction. */
  #wrote = false
  #watcher: NodeJS.Timeout | undefined
  #open = true
  version = 0

  /** Opens (or creates) the store; throws an Error naming the path if it cannot be used. */
  constructor ({ path, busyTimeoutMs = DEFAULT_BUSY_TIMEOUT_MS, checkIntervalMs = DEFAULT_CHECK_INTERVAL_MS }: SharedRegistryOptions,
    load?: (name: string) => unknown) {
    const Driver = optionalPeer<DatabaseConstructor>('better-sqlite3', 'fastify-triton-shm: the sharedRegistry option', load)
    this.#checkIntervalMs = checkIntervalMs
    this.#leaseTablePath = `${path}-leases`
    this.#statisticsPath = `${path}-statistics`
    this.#channelsPath = `${path}-channels`
    let db: Database | undefined
    try {
      createPrivately(path)
      db = new Driver(path, { timeout: busyTimeoutMs })
      useWriteAheadLog(db, busyTimeoutMs)
      // Commits need no fsync: the registry lives no longer than the processes that share it.
      db.pragma('synchronous = NORMAL')
      db.transaction(() => createSchema(db as Database)).immediate()
      this.#db = db
      this.#statements = prepare(db)
      this.#db.transaction(() => this.#join()).immediate()
    } catch (error) {
      this.#leases?.close()
      db?.close()
      throw storeOpenFailed(error, path, (error as Error).message)
    }
  }

  /** Records this process and maps the lease table. The first process to arrive after every
   * earlier one has gone starts an empty registry, with a new table: registrations die with the
   * service, as they do with a Triton server. */
  #join (): void {
    const others = this.#liveUsers()
    const starting = others.length === 0
    if (starting) {
      this.#db.exec(`DELETE FROM regions; DELETE FROM users; ${CLEAR_MODELS}`)
      // Statistics start at zero with the service, as its registrations do; sockets of processes
      // that died are gone with them.
      StatisticsTable.remove(this.#statisticsPath)
      rmSync(this.#channelsPath, { recursive: true, force: true })
    }
    this.#leases = new LeaseTable(this.#leaseTablePath, starting)
    const slot = freeSlot(others.map((user) => user.slot), PROCESS_SLOTS)
    if (slot === undefined) throw new Error(`at most ${PROCESS_SLOTS} processes can share a registry`)
    this.#slot = slot
    this.#leases.clear([slot], (this.#statements.regionSlots.all() as number[]))
    const { pid, startTime } = thisProcess()
    this.#userId = Number(this.#statements.addUser.run(pid, startTime, slot).lastInsertRowid)
  }

  /** Users other than this one whose process is alive; the others are forgotten. */
  #liveUsers (): UserRow[] {
    const users = this.#statements.otherUsers.all(this.#userId) as UserRow[]
    return users.filter((user) => {
      if (isAlive({ pid: user.pid, startTime: user.start_time })) return true
      this.#forget(user.id)
      return false
    })
  }

  /** Forgets a process that died: its row, the sequences it owned, its socket. */
  #forget (userId: number): void {
    this.#statements.removeUser.run(userId)
    this.#statements.removeSequences.run(userId)
    rmSync(this.#socketOf(userId), { force: true })
  }

  #socketOf (userId: number): string {
    return path.join(this.#channelsPath, String(userId))
  }

  #isLive (userId: number): boolean {
    const user = this.#statements.user.get(userId) as UserRow | undefined
    if (user === undefined) return false
    if (isAlive({ pid: user.pid, startTime: user.start_time })) return true
    this.#forget(userId)
    return false
  }

  /** The other processes of the service, and who owns each sequence. */
  #servicePeers (): SqliteServicePeers {
    return (this.#peers ??= new SqliteServicePeers({
      db: this.#db,
      userId: this.#userId,
      socketOf: (userId) => this.#socketOf(userId),
      read: (use) => this.#guard(use),
      liveUserIds: () => this.#liveUsers().map((user) => user.id),
      isLive: (userId) => this.#isLive(userId)
    }))
  }

  /** The model table's side of this store: statistics every process adds to, and the model
   * repository's state. */
  models (): SqliteModelStore {
    return (this.#models ??= new SqliteModelStore({
      db: this.#db,
      statisticsPath: this.#statisticsPath,
      processSlot: this.#slot,
      transaction: (change) => this.transaction(change),
      wrote: () => { this.#wrote = true },
      read: (use) => this.#guard(use),
      revision: () => this.#leases.revision,
      liveProcessSlots: () => [this.#slot, ...this.#liveUsers().map((user) => user.slot)],
      peers: this.#servicePeers()
    }))
  }

  records (): ReadonlyMap<string, RegionRecord> {
    if (this.#open && this.#leases.revision !== this.#revision) this.#guard(() => this.#reread())
    return this.#records
  }

  #reread (): void {
    // The revision first: a change made while reading bumps it again, and is read next time. It
    // counts once the read succeeded: a process that could not read a change never serves the
    // records from before it as current, but tries again (and fails, as every process does) at
    // its next call.
    const revision = this.#leases.revision
    const rows = this.#statements.regions.all() as RegionRow[]
    this.#revision = revision
    this.#records = new Map(rows.map((row) => [row.name, toRecord(row)]))
    this.#regionSlots = new Map(rows.map((row) => [row.id, row.slot]))
    this.version++
  }

  /** Inside a transaction the records are always read afresh. One that wrote announces it, once
   * committed (or undone), through the lease table's revision: every process rereads the records
   * at its next call. */
  transaction<T> (change: () => T): T {
    // Counts that no longer reach other processes cannot tell whether a region is in use.
    if (!this.#leases.intact) throw storeFailed(new Error(LEASE_TABLE_SHRUNK))
    return this.#guard(() => {
      this.#wrote = false
      try {
        return this.#db.transaction(() => {
          this.#reread()
          return change()
        }).immediate()
      } finally {
        if (this.#wrote) this.#leases.bumpRevision()
      }
    })
  }

  /**
   * Every use of the file starts with an empty page cache: pages this connection read earlier are
   * not taken for what the file holds now. Otherwise a write into a damaged file (garbage over its
   * write-ahead log) would succeed in the process that still had the damaged pages cached, and be
   * acknowledged, while every other process fails to read them: each process now reads what the
   * others read, and a damaged store is refused alike by all. SQLite's own errors (a busy,
   * corrupt or vanished store) become a 500 for the request; the cause, which may name the file,
   * stays with the server.
   */
  #guard<T> (use: () => T): T {
    try {
      this.#db.pragma('shrink_memory')
      return use()
    } catch (error) {
      if ((error as Error).name === 'SqliteError') throw storeFailed(error)
      throw error
    }
  }

  add ({ name, key, offset, byteSize, object }: NewRegion): RegionRecord {
    // The registry keeps the count within maxRegions: a slot is free.
    const slot = freeSlot(this.#regionSlots.values(), REGION_SLOTS) as number
    // A process that died holding a region that had this slot may have left a count behind.
    const live = new Set([this.#slot, ...this.#liveUsers().map((user) => user.slot)])
    const gone = Array.from({ length: PROCESS_SLOTS }, (_, processSlot) => processSlot).filter((processSlot) => !live.has(processSlot))
    this.#leases.clear(gone, [slot])
    const id = Number(this.#statements.addRegion.run(name, key, offset, byteSize, object, slot).lastInsertRowid)
    this.#wrote = true
    this.#regionSlots.set(id, slot)
    return { id, name, key, offset, byteSize, object, unregisterPending: false }
  }

  markUnregisterPending ({ id }: RegionRecord): void {
    this.#statements.markPending.run(id)
    this.#wrote = true
  }

  remove ({ id }: RegionRecord): void {
    this.#statements.removeRegion.run(id)
    this.#wrote = true
    this.#regionSlots.delete(id)
  }

  hold (record: RegionRecord): boolean {
    const slot = this.#regionSlots.get(record.id) as number
    this.#leases.setHolding(this.#slot, slot, true)
    // Counted before looking again: a removal committed before this count is seen now. One
    // committed while this runs may miss the count; the lease is then served as if it came
    // first, from this process's mapping, which stays until the lease ends.
    if (this.records().get(record.name)?.id === record.id) {
      this.#holding.set(record.id, slot)
      return true
    }
    this.#leases.setHolding(this.#slot, slot, false)
    return false
  }

  letGo ({ id }: RegionRecord): void {
    this.#leases.setHolding(this.#slot, this.#holding.get(id) as number, false)
    this.#holding.delete(id)
  }

  heldElsewhere ({ id, name }: RegionRecord): boolean {
    return this.#leases.held(this.#regionSlots.get(id) as number, this.#liveUsers().map((user) => user.slot), ({ processSlot, value }) => {
      this.#damaged.push(`region '${name}' (process slot ${processSlot}): ${value} (a counter is 0 or 1); counted as no lease, and reset`)
    })
  }

  lastUser (): boolean {
    return this.#liveUsers().length === 0
  }

  /**
   * Each check has the records read again, from the file. That catches a change whose writer died
   * between its commit and its second bump, and a store damaged since the last check: a process
   * that read the store before the damage would otherwise go on answering from what it read,
   * while one that had a change left to read refuses, so within a check every process refuses
   * alike. It notices a lease table shrunk under the processes that count in it, and reports the
   * damaged lease counters found since the last check (the registry logs what this throws).
   */
  watch (check: (refresh: () => void) => void): void {
    this.#watcher = setInterval(() => {
      check(() => this.#refresh())
      this.#models?.checked()
    }, this.#checkIntervalMs).unref()
  }

  #refresh (): void {
    this.#revision = Number.NaN
    if (!this.#leases.intact) throw new Error(LEASE_TABLE_SHRUNK)
    if (this.#damaged.length === 0) return
    const damaged = this.#damaged.splice(0)
    throw new Error(`the lease table beside the store held damaged counters: ${damaged.join('; ')}`)
  }

  /** Leaves the store. The last process out removes the lease table. A store that fails keeps
   * this process's row, forgotten by the first process to find it gone. */
  close (): void {
    this.#open = false
    clearInterval(this.#watcher)
    this.#records = new Map()
    try {
      this.#db.transaction(() => {
        this.#statements.removeUser.run(this.#userId)
        this.#statements.removeSequences.run(this.#userId)
        if (this.#liveUsers().length === 0) {
          LeaseTable.remove(this.#leaseTablePath)
          StatisticsTable.remove(this.#statisticsPath)
          rmSync(this.#channelsPath, { recursive: true, force: true })
        }
      }).immediate()
    } catch {
      // Busy past its timeout, or damaged: this process's row stays, and the first process to
      // find it gone forgets it.
    } finally {
      this.#peers?.close()
      this.#models?.close()
      this.#leases.close()
      this.#db.close()
    }
  }
}

function prepare (db: Database) {
  const statement = (sql: string): Statement => db.prepare(sql)
  return {
    regions: statement('SELECT id, name, key, offset, byte_size, object, unregister_pending, slot FROM regions'),
    regionSlots: statement('SELECT slot FROM regions').pluck(),
    addRegion: statement('INSERT INTO regions (name, key, offset, byte_size, object, slot) VALUES (?, ?, ?, ?, ?, ?)'),
    markPending: statement('UPDATE regions SET unregister_pending = 1 WHERE id = ?'),
    removeRegion: statement('DELETE FROM regions WHERE id = ?'),
    addUser: statement('INSERT INTO users (pid, start_time, slot) VALUES (?, ?, ?)'),
    otherUsers: statement('SELECT id, pid, start_time, slot FROM users WHERE id != ?'),
    user: statement('SELECT id, pid, start_time, slot FROM users WHERE id = ?'),
    removeUser: statement('DELETE FROM users WHERE id = ?'),
    removeSequences: statement('DELETE FROM sequences WHERE owner = ?')
  }
}
