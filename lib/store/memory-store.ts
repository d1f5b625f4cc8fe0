/** The default store: a Map in this process, for one registry. */
import type { NewRegion, RegionRecord, RegionStore } from './region-store'

export class MemoryStore implements RegionStore {
  readonly #byName = new Map<string, RegionRecord>()
  readonly #byId = new Map<number, RegionRecord>()
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

  markUnregisterPending (id: number): void {
    this.#set({ ...this.#byId.get(id) as RegionRecord, unregisterPending: true })
  }

  #set (record: RegionRecord): void {
    this.#byName.set(record.name, record)
    this.#byId.set(record.id, record)
    this.version++
  }

  remove (id: number): void {
    const record = this.#byId.get(id) as RegionRecord
    this.#byName.delete(record.name)
    this.#byId.delete(id)
    this.version++
  }

  readonly maxRegions = Number.POSITIVE_INFINITY

  // One process, one registry: its own lease counts are the only holds there are.
  hold (record: RegionRecord): boolean {
    return this.#byId.has(record.id)
  }

  letGo (): void {}

  heldElsewhere (): boolean {
    return false
  }

  lastUser (): boolean {
    return true
  }

  watch (): void {}

  close (): void {}
}
