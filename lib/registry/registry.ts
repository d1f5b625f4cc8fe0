/**
 * The registered regions of one Fastify instance (or, with `sharedRegistry`, of every process of a
 * service), with Triton's rules: validation order, duplicate names, deferred unregister while
 * leases are live, limits and key policy. Where the table lives is the store's business; the
 * mappings are this process's own.
 */
import { EventEmitter } from 'node:events'
import type {
  Lease, Limits, PeerIdentity, RegionSource, RegistryCounters, RegistryEvents, RegistryLogger, RegistryOptions,
  SharedMemoryRegionStatus, SystemSharedMemoryRegistry
} from '../../types'
import * as errors from '../errors'
import { TritonError } from '../errors'
import { InFlightBytes } from './in-flight-bytes'
import { KeyPolicy } from './key-policy'
import type { OperationSpans } from './operation-spans'
import { RegionLease } from './lease'
import { MappedRange, PosixShmError } from '../addon/posix-shm'
import { Region, regionStatus } from './region'
import { MemoryStore } from '../store/memory-store'
import type { ModelStore } from '../store/model-store'
import type { RegionRecord, RegionStore } from '../store/region-store'
import { SqliteStore } from '../store/sqlite-store'

const GiB = 1024 ** 3

export const DEFAULT_LIMITS: Readonly<Required<Limits>> = {
  maxRegions: 1024,
  maxRegionBytes: 16 * GiB,
  maxTotalBytes: 64 * GiB
}

const UINT64_MAX = 2n ** 64n - 1n

/** A lease is one view: at most the largest ArrayBuffer this Node allows (regions may be larger). */
const MAX_VIEW_BYTES = BigInt(MappedRange.maxWindowBytes)

const silentLogger: RegistryLogger = { info () {}, debug () {} }

/** Logged for the operator when a key names no object here: Triton's most reported shared memory
 * problem, and the client's message (Triton's) cannot say why. */
const NOT_IN_THIS_SHM = "system shared memory object does not exist in this server's /dev/shm: most likely the client " +
  'and the server do not share /dev/shm (separate containers without --ipc=host or --ipc=container:<name>, ' +
  'Kubernetes containers without one memory-backed emptyDir mounted at /dev/shm, or another pod or host)'

const isUnsignedInteger = (value: unknown): value is number =>
  Number.isSafeInteger(value) && (value as number) >= 0

/** A request's offset or byte size as an exact integer, or undefined if it is not an unsigned
 * integer. Numbers above 2^53 are inexact but still integers: they must reach the overflow check. */
function toUnsigned (value: number | bigint): bigint | undefined {
  if (typeof value === 'bigint') return value >= 0n ? value : undefined
  return Number.isInteger(value) && value >= 0 ? BigInt(value) : undefined
}

/**
 * Checks that `[offset, offset + byteSize)` lies in the region and fits one view, throwing the
 * register's texts. What clients send (safe integers) is checked as numbers: exact, as each is
 * below 2^53 and a sum past it still compares past any region's size. Anything else, or a range
 * refused, is checked again as BigInts, which find the right error.
 */
function checkRange (name: string, offset: number | bigint, byteSize: number | bigint, regionBytes: number): void {
  if (isUnsignedInteger(offset) && isUnsignedInteger(byteSize) && offset < regionBytes &&
    offset + byteSize <= regionBytes && byteSize <= MappedRange.maxWindowBytes) return
  const start = toUnsigned(offset)
  const length = toUnsigned(byteSize)
  if (start === undefined || length === undefined) throw errors.invalidUseArgs(name)
  const size = BigInt(regionBytes)
  if (start >= size) throw errors.invalidOffset(name)
  if (length > UINT64_MAX - start) throw errors.offsetOverflow(name, length, start)
  if (start + length > size) throw errors.invalidRange(name)
  if (length > MAX_VIEW_BYTES) throw errors.leaseTooLarge(name, length, MAX_VIEW_BYTES)
}

export class Registry extends EventEmitter<RegistryEvents> implements SystemSharedMemoryRegistry {
  readonly #store: RegionStore
  /** This process's mappings, by record id: a registration is mapped here at its first use. */
  readonly #mapped = new Map<number, Region>()
  /** The records announced with a `register` event, by id: what `sync()` compares the store with. */
  #announced = new Map<number, RegionRecord>()
  #announcedVersion: number
  readonly #keyPolicy: KeyPolicy
  readonly #limits: Required<Limits>
  readonly #log: RegistryLogger
  /** Refused registers and acquires, by error code. */
  readonly #rejections = new Map<string, number>()
  /** Set by close(): nothing would unmap a region registered afterwards. */
  #closed = false
  readonly inFlight: InFlightBytes
  /** The spans of the shared memory API's calls: set by the model table served with this
   * registry, in its `opentelemetry` trace mode (`ModelTable.serveWith`). */
  operationSpans: OperationSpans | undefined

  constructor (options: RegistryOptions = {}) {
    super()
    this.#keyPolicy = new KeyPolicy(options.allowKey, options.reservedKeyPrefixes)
    this.#limits = { ...DEFAULT_LIMITS, ...options.limits }
    this.#log = options.logger ?? silentLogger
    this.inFlight = new InFlightBytes(options.maxInFlightBytes)
    this.#store = options.sharedRegistry === undefined ? new MemoryStore() : new SqliteStore(options.sharedRegistry)
    // Registrations made before this process arrived are the registry's state, not news.
    for (const record of this.#store.records().values()) this.#announced.set(record.id, record)
    this.#announcedVersion = this.#store.version
    this.#store.watch((refresh) => this.#check(refresh))
  }

  register (name: string, source: RegionSource): void {
    try {
      this.#register(name, source)
    } catch (error) {
      this.#log.debug({ region: name, key: source?.key, reason: (error as Error).message },
        'refused to register system shared memory region')
      throw this.#rejected(error)
    }
  }

  /** Counts a refusal by its code (errors that are not the client's count as `ERR_SHM`). */
  #rejected (error: unknown): unknown {
    const code = error instanceof TritonError ? error.code : 'ERR_SHM'
    this.#rejections.set(code, (this.#rejections.get(code) ?? 0) + 1)
    return error
  }

  #register (name: string, { key, offset = 0, byteSize, peer }: RegionSource): void {
    if (this.#closed) throw errors.registryClosed(name)
    if (typeof name !== 'string' || name === '') throw errors.missingRegionName()
    if (typeof key !== 'string') throw errors.missingField('key')
    if (!isUnsignedInteger(offset) || !isUnsignedInteger(byteSize)) throw errors.invalidRegisterArgs(name)
    this.#keyPolicy.check(name, key)
    let mapping: MappedRange | undefined
    try {
      const record = this.#store.transaction(() => {
        const records = this.#current()
        const existing = records.get(name)
        if (existing !== undefined && !this.#removeIfUnheld(existing)) throw errors.duplicateRegion(name)
        this.#checkLimits(name, byteSize, records)
        // The client's user must be known to be judged: refused before the file system is touched.
        if (peer === null) throw errors.peerUnknown(name)
        mapping = this.#map(name, key, offset, byteSize, peer)
        return this.#store.add({ name, key, offset, byteSize, object: mapping.object })
      })
      this.#mapped.set(record.id, new Region(record, mapping as MappedRange))
    } catch (error) {
      // Nothing of a refused registration stays: the store undid its writes, and the mapping goes.
      (mapping as MappedRange | undefined)?.unmap()
      throw error
    }
    this.sync()
  }

  /** Completes the deferred unregister of a record once nobody holds it any more (its last lease
   * ended, or the processes that held it died): true if it was removed. */
  #removeIfUnheld (record: RegionRecord): boolean {
    const unheld = record.unregisterPending && this.#leasesHere(record.id) === 0 && !this.#store.heldElsewhere(record)
    if (unheld) this.#store.remove(record)
    return unheld
  }

  #checkLimits (name: string, byteSize: number, records: ReadonlyMap<string, RegionRecord>): void {
    const { maxRegions, maxRegionBytes, maxTotalBytes } = this.#limits
    const mostRegions = Math.min(maxRegions, this.#store.maxRegions)
    if (records.size >= mostRegions) throw errors.tooManyRegions(name, mostRegions)
    if (byteSize > maxRegionBytes) throw errors.regionTooLarge(name, byteSize, maxRegionBytes)
    if (totalBytes(records) + byteSize > maxTotalBytes) throw errors.totalTooLarge(name, byteSize, maxTotalBytes)
  }

  #map (name: string, key: string, offset: number, byteSize: number, peer: PeerIdentity | undefined): MappedRange {
    try {
      return new MappedRange(key, offset, byteSize, peer)
    } catch (error) {
      // The cause (errno, object type) stays in this process: the client only learns that it failed.
      const { code } = error as PosixShmError
      if (code === 'ENOENT') this.#log.info({ region: name, key }, NOT_IN_THIS_SHM)
      if (code === 'ERR_SHM_PEER_DENIED') throw errors.accessDenied(name, key)
      throw code === 'ERR_SHM_OUT_OF_BOUNDS' ? errors.invalidRegisterArgs(name) : errors.unableToOpen(key)
    }
  }

  unregister (name: string): void {
    this.#store.transaction(() => this.#unregister(name))
    this.sync()
  }

  unregisterAll (): void {
    for (const name of [...this.#current().keys()]) this.unregister(name)
  }

  #unregister (name: string): void {
    const record = this.#store.records().get(name)
    if (record === undefined) return
    const leasesHere = this.#leasesHere(record.id)
    if (leasesHere === 0 && !this.#store.heldElsewhere(record)) return this.#store.remove(record)
    if (!record.unregisterPending) this.#store.markUnregisterPending(record)
    this.#log.info({ region: name, liveLeases: leasesHere },
      'system shared memory region will be unregistered when its last lease ends')
  }

  #leasesHere (id: number): number {
    return this.#mapped.get(id)?.liveLeases ?? 0
  }

  /**
   * Brings this registry up to date with its store: announces registrations and removals made by
   * other processes, and unmaps what is gone. Every method calls it first, so the cost when nothing
   * changed is one cheap check.
   */
  sync (): void {
    this.#current()
  }

  /** The store's records, once this registry is up to date with them. */
  #current (): ReadonlyMap<string, RegionRecord> {
    const records = this.#store.records()
    if (this.#store.version === this.#announcedVersion) return records
    this.#announcedVersion = this.#store.version
    const current = new Map<number, RegionRecord>()
    for (const record of records.values()) current.set(record.id, record)
    const previous = this.#announced
    this.#announced = current
    for (const [id, record] of previous) if (!current.has(id)) this.#announceRemoval(record)
    for (const [id, record] of current) if (!previous.has(id)) this.#announceRegistration(record)
    return records
  }

  #announceRegistration (record: RegionRecord): void {
    const { name: region, key, offset, byteSize } = record
    this.#log.info({ region, key, offset, byteSize }, 'registered system shared memory region')
    this.emit('register', regionStatus(record))
  }

  #announceRemoval (record: RegionRecord): void {
    const region = this.#mapped.get(record.id)
    // A region still leased here keeps its mapping until its last lease ends.
    if (region !== undefined && region.liveLeases === 0) this.#unmap(region)
    this.#log.info({ region: record.name, key: record.key, byteSize: record.byteSize },
      'unregistered system shared memory region')
    this.emit('unregister', regionStatus(record))
  }

  #unmap (region: Region): void {
    this.#mapped.delete(region.record.id)
    region.close()
  }

  status (name?: string): SharedMemoryRegionStatus[] {
    const records = this.#current()
    if (name === undefined) {
      return [...records.values()].sort((a, b) => (a.name < b.name ? -1 : 1)).map(regionStatus)
    }
    const record = records.get(name)
    if (record === undefined) throw errors.regionStatusNotFound(name)
    return [regionStatus(record)]
  }

  has (name: string): boolean {
    return this.#current().has(name)
  }

  acquire (name: string, offset: number | bigint, byteSize: number | bigint): Lease {
    try {
      return this.#acquire(name, offset, byteSize)
    } catch (error) {
      throw this.#rejected(error)
    }
  }

  #acquire (name: string, offset: number | bigint, byteSize: number | bigint): Lease {
    const record = this.#current().get(name)
    if (record === undefined) throw errors.regionNotFound(name)
    const region = this.#regionHere(record)
    checkRange(name, offset, byteSize, record.byteSize)
    // Exact now: both lie within the region.
    const start = Number(offset)
    const length = Number(byteSize)
    if (!region.reaches(start, length)) throw errors.regionTruncated(name)
    const view = region.view(start, length)
    if (region.liveLeases === 0) this.#holdHere(region)
    region.hold()
    const range = { object: region.object, start: record.offset + start }
    return new RegionLease(name, view, start, range, () => { if (region.letGo()) this.#lastLeaseHereEnded(region) })
  }

  /** This process's mapping of a registration, made at its first use here. */
  #regionHere (record: RegionRecord): Region {
    const mapped = this.#mapped.get(record.id)
    if (mapped !== undefined) return mapped
    if (this.#closed) throw errors.regionNotFound(record.name)
    let mapping: MappedRange
    try {
      mapping = new MappedRange(record.key, record.offset, record.byteSize)
    } catch {
      throw errors.regionUnavailableHere(record.name)
    }
    // The key may name another object by now (the client's was removed and made again, or someone
    // else made one under that name): only the registered object is ever served.
    if (mapping.object !== record.object) {
      mapping.unmap()
      throw errors.regionUnavailableHere(record.name)
    }
    const region = new Region(record, mapping)
    this.#mapped.set(record.id, region)
    return region
  }

  /** Tells the store that this process holds leases on the region, before the first one is used. */
  #holdHere (region: Region): void {
    if (this.#store.hold(region.record)) return
    // Removed by another process since this one last looked.
    this.sync()
    throw errors.regionNotFound(region.record.name)
  }

  /** The last holder anywhere of a region waiting for its unregister removes it. */
  #lastLeaseHereEnded (region: Region): void {
    const { record } = region
    this.#store.letGo(record)
    if (this.#current().get(record.name)?.unregisterPending === true) this.#removeIfHeldByNone(record.name)
    const gone = this.#closed || !this.#announced.has(record.id)
    if (gone && this.#mapped.get(record.id) === region) this.#unmap(region)
    if (this.#closed && this.#mapped.size === 0) this.#store.close()
  }

  /** Completes a deferred unregister if nobody holds the region any more. A store that cannot
   * do it now leaves it to the next check. */
  #removeIfHeldByNone (name: string): void {
    try {
      this.#store.transaction(() => {
        const record = this.#store.records().get(name)
        if (record !== undefined) this.#removeIfUnheld(record)
      })
      this.sync()
    } catch (error) {
      this.#log.info({ region: name, reason: (error as Error).message },
        'could not complete the deferred unregister of a system shared memory region; will retry')
    }
  }

  /** Run now and then by a shared store: notices other processes' changes while this one makes
   * no calls, and completes deferred unregisters whose holders ended or died. */
  #check (refresh: () => void): void {
    try {
      refresh()
      for (const record of this.#current().values()) if (record.unregisterPending) this.#removeIfHeldByNone(record.name)
      this.sync()
    } catch (error) {
      const { message, cause } = error as Error
      this.#log.info({ reason: message, cause: (cause as Error | undefined)?.message }, 'could not check the shared memory registry')
    }
  }

  /** The model table's side of this registry's store (`ModelTable.serveWith`): with
   * `sharedRegistry`, model statistics and repository state every process of the service sees. */
  modelStore (): ModelStore {
    return this.#store.models()
  }

  counters (): RegistryCounters {
    const current = this.#current()
    const records = [...current.values()]
    return {
      regions: records.length,
      bytesMapped: totalBytes(current),
      liveLeases: [...this.#mapped.values()].reduce((leases, region) => leases + region.liveLeases, 0),
      deferredUnregisters: records.filter((record) => record.unregisterPending).length,
      rejections: Object.fromEntries(this.#rejections)
    }
  }

  /**
   * This process stops using the registry. Alone (always, without `sharedRegistry`), it unregisters
   * everything: a request in flight keeps its regions mapped until its leases end, as an unregister
   * would, so it finishes with its views intact. With others sharing the registry, their
   * registrations stay; only this process's mappings go. Registering is refused from now on.
   */
  close (): void {
    if (this.#closed) return
    this.#closed = true
    try {
      if (this.#store.transaction(() => this.#store.lastUser())) this.unregisterAll()
    } catch (error) {
      // A broken store must not keep the app from closing: the mappings below go all the same.
      this.#log.info({ reason: (error as Error).message }, 'could not unregister the system shared memory regions at close')
    }
    for (const region of [...this.#mapped.values()]) if (region.liveLeases === 0) this.#unmap(region)
    if (this.#mapped.size === 0) this.#store.close()
  }
}

function totalBytes (records: ReadonlyMap<string, RegionRecord>): number {
  let bytes = 0
  for (const record of records.values()) bytes += record.byteSize
  return bytes
}
