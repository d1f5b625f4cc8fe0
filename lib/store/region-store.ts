/**
 * Where the registry's table lives. Triton's rules stay in the registry, once; a store only keeps
 * the records, makes a change atomic against everyone sharing them, and knows who holds leases.
 * Two stores: in-process (the default) and shared by every process of a service (SQLite).
 */
import type { ModelStore } from './model-store'

/** One registration. `id` is never reused by a store, so a name registered again is a new record:
 * a process can never serve it from the mapping of an earlier registration. */
export interface RegionRecord {
  readonly id: number
  readonly name: string
  readonly key: string
  readonly offset: number
  readonly byteSize: number
  /** The object the key named at registration, as `<device>:<inode>` (`MappedRange.object`): a
   * process that maps the key later must find this object, not another made under that name since. */
  readonly object: string
  /** Unregistered while leases were live somewhere: removed when the last one ends. */
  readonly unregisterPending: boolean
}

export type NewRegion = Omit<RegionRecord, 'id' | 'unregisterPending'>

export interface RegionStore {
  /** The current records by name. A shared store first checks, cheaply, whether another process
   * changed them; the map is only rebuilt when one did. */
  records(): ReadonlyMap<string, RegionRecord>
  /** Changes whenever `records()` would return different records. */
  readonly version: number
  /** Runs `change` as one step for everyone sharing the store: `records()` inside it is the
   * latest state, and a throw undoes every write made in it. */
  transaction<T>(change: () => T): T
  add(region: NewRegion): RegionRecord
  /** These two take a record `records()` holds now, inside a transaction. */
  markUnregisterPending(record: RegionRecord): void
  remove(record: RegionRecord): void
  /** This user starts holding leases on a record (before it uses the first one); false if the
   * record is gone. */
  hold(record: RegionRecord): boolean
  /** This user's leases on a record have all ended. */
  letGo(record: RegionRecord): void
  /** Whether another user (another process, still alive) holds leases on a record. */
  heldElsewhere(record: RegionRecord): boolean
  /** Most records the store can keep (the registry's `maxRegions` may be lower). */
  readonly maxRegions: number
  /** Whether nobody else uses the store: closing this user then ends the registry itself. */
  lastUser(): boolean
  /** Calls `check` now and then while the store is open, so a user that makes no calls still
   * notices others' changes and the holds of processes that died. `check` first calls `refresh`,
   * which throws if the store is found broken. */
  watch(check: (refresh: () => void) => void): void
  /** The model table's side of the store: model statistics and the model repository's state,
   * seen by everyone sharing the store. */
  models(): ModelStore
  close(): void
}
