/**
 * The shared store: one SQLite file (WAL mode) that every process of a service opens, so they all
 * see one registry. Each open store is a "user" of the file, recorded with its process's identity;
 * a user that holds leases on a region has a row in `holds`, so an unregister anywhere can tell
 * whether the region is still in use somewhere, and holds of a process that died are let go.
 */
import { closeSync, constants, openSync } from 'node:fs'
import type { SharedRegistryOptions } from '../../types'
import { storeFailed } from '../errors'
import { optionalPeer } from '../optional-peer'
import { isAlive, thisProcess } from './process-identity'
import type { NewRegion, RegionRecord, RegionStore } from './region-store'
import type { Database, DatabaseConstructor, Statement } from './sqlite-driver'

export const DEFAULT_BUSY_TIMEOUT_MS = 5000
export const DEFAULT_CHECK_INTERVAL_MS = 1000

const SCHEMA = `
  CREATE TABLE IF NOT EXISTS regions (
    -- AUTOINCREMENT: an id is never used twice, even after the newest record is removed.
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL UNIQUE,
    key TEXT NOT NULL,
    offset INTEGER NOT NULL,
    byte_size INTEGER NOT NULL,
    unregister_pending INTEGER NOT NULL DEFAULT 0
  );
  CREATE TABLE IF NOT EXISTS users (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    pid INTEGER NOT NULL,
    start_time INTEGER NOT NULL
  );
  CREATE TABLE IF NOT EXISTS holds (
    region_id INTEGER NOT NULL,
    user_id INTEGER NOT NULL,
    PRIMARY KEY (region_id, user_id)
  ) WITHOUT ROWID;
  -- Bumped by every change of regions: a process rereads them only when it moved, not whenever
  -- another process takes or lets go of a hold.
  CREATE TABLE IF NOT EXISTS revision (value INTEGER NOT NULL);
  INSERT INTO revision SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM revision);
`

interface RegionRow { id: number, name: string, key: string, offset: number, byte_size: number, unregister_pending: number }
interface UserRow { id: number, pid: number, start_time: number }

const toRecord = (row: RegionRow): RegionRecord => ({
  id: row.id,
  name: row.name,
  key: row.key,
  offset: row.offset,
  byteSize: row.byte_size,
  unregisterPending: row.unregister_pending === 1
})

/** Creates the file readable and writable by its owner only (SQLite gives its WAL files the same
 * mode); an existing file is opened as it is. Never follows a symbolic link. */
function createPrivately (path: string): void {
  closeSync(openSync(path, constants.O_RDWR | constants.O_CREAT | constants.O_NOFOLLOW, 0o600))
}

export class SqliteStore implements RegionStore {
  readonly #db: Database
  readonly #statements: ReturnType<typeof prepare>
  readonly #userId: number
  readonly #checkIntervalMs: number
  #records: ReadonlyMap<string, RegionRecord> = new Map()
  #dataVersion = -1
  #revision = -1
  #watcher: NodeJS.Timeout | undefined
  #open = true
  version = 0

  /** Opens (or creates) the store; throws an Error naming the path if it cannot be used. */
  constructor ({ path, busyTimeoutMs = DEFAULT_BUSY_TIMEOUT_MS, checkIntervalMs = DEFAULT_CHECK_INTERVAL_MS }: SharedRegistryOptions,
    load?: (name: string) => unknown) {
    const Driver = optionalPeer<DatabaseConstructor>('better-sqlite3', 'fastify-triton-shm: the sharedRegistry option', load)
    this.#checkIntervalMs = checkIntervalMs
    let db: Database | undefined
    try {
      createPrivately(path)
      db = new Driver(path, { timeout: busyTimeoutMs })
      db.pragma('journal_mode = WAL')
      // Commits need no fsync: the registry lives no longer than the processes that share it.
      db.pragma('synchronous = NORMAL')
      db.exec(SCHEMA)
      this.#db = db
      this.#statements = prepare(db)
      this.#userId = this.#join()
    } catch (error) {
      db?.close()
      throw new Error(`fastify-triton-shm: cannot open the shared registry store '${path}': ${(error as Error).message}`, { cause: error })
    }
  }

  /** Records this user. The first one to arrive after every earlier process has gone starts an
   * empty registry: registrations die with the service, as they do with a Triton server. */
  #join (): number {
    return this.#db.transaction(() => {
      if (this.#liveUsers().length === 0) this.#clear()
      const { pid, startTime } = thisProcess()
      return Number(this.#statements.addUser.run(pid, startTime).lastInsertRowid)
    }).immediate()
  }

  /** Users other than this one whose process is alive; the others are forgotten, with their holds. */
  #liveUsers (): UserRow[] {
    const users = this.#statements.otherUsers.all(this.#userId ?? 0) as UserRow[]
    return users.filter((user) => {
      if (isAlive({ pid: user.pid, startTime: user.start_time })) return true
      this.#statements.removeHoldsOf.run(user.id)
      this.#statements.removeUser.run(user.id)
      return false
    })
  }

  #clear (): void {
    this.#db.exec('DELETE FROM regions; DELETE FROM holds; DELETE FROM users')
    this.#changed()
  }

  records (): ReadonlyMap<string, RegionRecord> {
    if (!this.#open) return this.#records
    return this.#guard(() => this.#refresh())
  }

  /** Rereads the regions if another process changed them: one `PRAGMA data_version` when nothing
   * was written anywhere, one more read when only holds were. */
  #refresh (): ReadonlyMap<string, RegionRecord> {
    const dataVersion = this.#statements.dataVersion.get() as number
    if (dataVersion === this.#dataVersion) return this.#records
    this.#dataVersion = dataVersion
    const revision = this.#statements.revision.get() as number
    if (revision === this.#revision) return this.#records
    this.#revision = revision
    const rows = this.#statements.regions.all() as RegionRow[]
    this.#records = new Map(rows.map((row) => [row.name, toRecord(row)]))
    this.version++
    return this.#records
  }

  transaction<T> (change: () => T): T {
    return this.#guard(() => this.#db.transaction(change).immediate())
  }

  /** SQLite's own errors (a busy, corrupt or vanished store) become a 500 for the request; the
   * cause, which may name the file, stays with the server. */
  #guard<T> (use: () => T): T {
    try {
      return use()
    } catch (error) {
      if ((error as Error).name === 'SqliteError') throw storeFailed(error)
      throw error
    }
  }

  add ({ name, key, offset, byteSize }: NewRegion): RegionRecord {
    const id = Number(this.#statements.addRegion.run(name, key, offset, byteSize).lastInsertRowid)
    this.#changed()
    return { id, name, key, offset, byteSize, unregisterPending: false }
  }

  markUnregisterPending (id: number): void {
    this.#statements.markPending.run(id)
    this.#changed()
  }

  remove (id: number): void {
    this.#statements.removeHoldsOn.run(id)
    this.#statements.removeRegion.run(id)
    this.#changed()
  }

  /** Our own writes leave `data_version` as it was: bump the revision, and forget what we read. */
  #changed (): void {
    this.#statements.bumpRevision.run()
    this.#dataVersion = -1
  }

  hold (id: number): boolean {
    return this.#guard(() => this.#statements.hold.run(this.#userId, id).changes === 1)
  }

  letGo (id: number): void {
    this.#statements.letGo.run(id, this.#userId)
  }

  heldElsewhere (id: number): boolean {
    const holders = new Set(this.#statements.holders.all(id, this.#userId).map((row) => (row as { user_id: number }).user_id))
    return holders.size > 0 && this.#liveUsers().some((user) => holders.has(user.id))
  }

  lastUser (): boolean {
    return this.#liveUsers().length === 0
  }

  watch (check: () => void): void {
    this.#watcher = setInterval(check, this.#checkIntervalMs).unref()
  }

  /** Leaves the store: this user's holds go with it. Called once. */
  close (): void {
    this.#open = false
    clearInterval(this.#watcher)
    this.#records = new Map()
    try {
      this.#db.transaction(() => {
        this.#statements.removeHoldsOf.run(this.#userId)
        this.#statements.removeUser.run(this.#userId)
      }).immediate()
    } finally {
      this.#db.close()
    }
  }
}

function prepare (db: Database) {
  const statement = (sql: string): Statement => db.prepare(sql)
  return {
    dataVersion: statement('PRAGMA data_version').pluck(),
    revision: statement('SELECT value FROM revision').pluck(),
    bumpRevision: statement('UPDATE revision SET value = value + 1'),
    regions: statement('SELECT id, name, key, offset, byte_size, unregister_pending FROM regions'),
    addRegion: statement('INSERT INTO regions (name, key, offset, byte_size) VALUES (?, ?, ?, ?)'),
    markPending: statement('UPDATE regions SET unregister_pending = 1 WHERE id = ?'),
    removeRegion: statement('DELETE FROM regions WHERE id = ?'),
    removeHoldsOn: statement('DELETE FROM holds WHERE region_id = ?'),
    // Holds only a region that still exists: `changes` is 0 if it went in the meantime.
    hold: statement('INSERT OR REPLACE INTO holds (region_id, user_id) SELECT id, ? FROM regions WHERE id = ?'),
    letGo: statement('DELETE FROM holds WHERE region_id = ? AND user_id = ?'),
    holders: statement('SELECT user_id FROM holds WHERE region_id = ? AND user_id != ?'),
    addUser: statement('INSERT INTO users (pid, start_time) VALUES (?, ?)'),
    otherUsers: statement('SELECT id, pid, start_time FROM users WHERE id != ?'),
    removeUser: statement('DELETE FROM users WHERE id = ?'),
    removeHoldsOf: statement('DELETE FROM holds WHERE user_id = ?')
  }
}
