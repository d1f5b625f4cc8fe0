/** The default store: a Map in this process, for one registry. */
import { MemoryModelStore } from './model-store'
import type { NewRegion, RegionRecord, RegionStore } from './region-store'

export class MemoryStore implements RegionStore {
  /** One map, by name: a record is current while it is the one under its name. */
  readonly #byName = new Map<string, RegionRecord>()
  #lastId = 0
  version = 0

  records (): ReadonlyMap<string, RegionRecord> {
    return this.#byName
  }

  transaction<T> (change: () => T): T {
    return change()
  }

  add ({ name, key, offset, byteSize, object }: NewRegion): RegionRecord {
    const record = { id: ++this.#lastId, name, key, offset, byteSize, object, unregisterPending: false }
    this.#set(record)
    return record
  }

  markUnregisterPending (record: RegionRecord): void {
    this.#set({ ...record, unregisterPending: true })
  }

  #set (record: RegionRecord): void {
    this.#byName.set(record.name, record)
    this.version++
  }

  remove ({ name }: RegionRecord): void {
    this.#byName.delete(name)
    this.version++
  }

  readonly maxRegions = Number.POSITIVE_INFINITY

  // One process, one registry: its own lease counts are the only holds there are.
  hold (record: RegionRecord): boolean {
    return this.#byName.get(record.name)?.id === record.id
  }

  letGo (): void {}

  heldElsewhere (): boolean {
    return false
  }

  lastUser (): boolean {
    return true
  }

  watch (): void {}

  #models: MemoryModelStore | undefined

  models (): MemoryModelStore {
    return (this.#models ??= new MemoryModelStore())
  }

  close (): void {}
}
