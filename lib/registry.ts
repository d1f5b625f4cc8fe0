/**
 * The table of registered regions of one Fastify instance, with Triton's rules: validation order,
 * duplicate names, deferred unregister while leases are live, limits and key policy.
 */
import { EventEmitter } from 'node:events'
import type {
  Lease, Limits, RegionSource, RegistryCounters, RegistryEvents, RegistryLogger, RegistryOptions,
  SharedMemoryRegionStatus, SystemSharedMemoryRegistry
} from '../types'
import * as errors from './errors'
import { SharedMemoryError } from './errors'
import { KeyPolicy } from './key-policy'
import { RegionLease } from './lease'
import { MappedRange, PosixShmError } from './posix-shm'
import { Region } from './region'

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

const isUnsignedInteger = (value: unknown): value is number =>
  Number.isSafeInteger(value) && (value as number) >= 0

/** A request's offset or byte size as an exact integer, or undefined if it is not an unsigned
 * integer. Numbers above 2^53 are inexact but still integers: they must reach the overflow check. */
function toUnsigned (value: number | bigint): bigint | undefined {
  if (typeof value === 'bigint') return value >= 0n ? value : undefined
  return Number.isInteger(value) && value >= 0 ? BigInt(value) : undefined
}

export class Registry extends EventEmitter<RegistryEvents> implements SystemSharedMemoryRegistry {
  readonly #regions = new Map<string, Region>()
  readonly #keyPolicy: KeyPolicy
  readonly #limits: Required<Limits>
  readonly #log: RegistryLogger
  /** Refused registers and acquires, by error code. */
  readonly #rejections = new Map<string, number>()
  /** Set by close(): nothing would unmap a region registered afterwards. */
  #closed = false

  constructor (options: RegistryOptions = {}) {
    super()
    this.#keyPolicy = new KeyPolicy(options.allowKey, options.reservedKeyPrefixes)
    this.#limits = { ...DEFAULT_LIMITS, ...options.limits }
    this.#log = options.logger ?? silentLogger
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
    const code = error instanceof SharedMemoryError ? error.code : 'ERR_SHM'
    this.#rejections.set(code, (this.#rejections.get(code) ?? 0) + 1)
    return error
  }

  #register (name: string, { key, offset = 0, byteSize }: RegionSource): void {
    if (this.#closed) throw errors.registryClosed(name)
    if (typeof name !== 'string' || name === '') throw errors.missingRegionName()
    if (typeof key !== 'string') throw errors.missingField('key')
    if (!isUnsignedInteger(offset) || !isUnsignedInteger(byteSize)) throw errors.invalidRegisterArgs(name)
    this.#keyPolicy.check(name, key)
    if (this.#regions.has(name)) throw errors.duplicateRegion(name)
    this.#checkLimits(name, byteSize)
    const region = this.#map(name, key, offset, byteSize)
    this.#regions.set(name, region)
    this.#log.info({ region: name, key, offset, byteSize }, 'registered system shared memory region')
    this.emit('register', region.status())
  }

  #checkLimits (name: string, byteSize: number): void {
    const { maxRegions, maxRegionBytes, maxTotalBytes } = this.#limits
    if (this.#regions.size >= maxRegions) throw errors.tooManyRegions(name, maxRegions)
    if (byteSize > maxRegionBytes) throw errors.regionTooLarge(name, byteSize, maxRegionBytes)
    if (this.#mappedBytes() + byteSize > maxTotalBytes) throw errors.totalTooLarge(name, byteSize, maxTotalBytes)
  }

  #map (name: string, key: string, offset: number, byteSize: number): Region {
    try {
      return new Region(name, key, offset, byteSize)
    } catch (error) {
      // The cause (errno, object type) stays in this process: the client only learns that it failed.
      const { code } = error as PosixShmError
      throw code === 'ERR_SHM_OUT_OF_BOUNDS' ? errors.invalidRegisterArgs(name) : errors.unableToOpen(key)
    }
  }

  unregister (name: string): void {
    const region = this.#regions.get(name)
    if (region === undefined) return
    if (region.liveLeases === 0) return this.#remove(region)
    region.unregisterPending = true
    this.#log.info({ region: name, liveLeases: region.liveLeases },
      'system shared memory region will be unregistered when its last lease ends')
  }

  unregisterAll (): void {
    for (const name of [...this.#regions.keys()]) this.unregister(name)
  }

  #remove (region: Region): void {
    this.#regions.delete(region.name)
    region.close()
    this.#log.info({ region: region.name, key: region.key, byteSize: region.byteSize },
      'unregistered system shared memory region')
    this.emit('unregister', region.status())
  }

  status (name?: string): SharedMemoryRegionStatus[] {
    if (name === undefined) {
      return [...this.#regions.values()]
        .sort((a, b) => (a.name < b.name ? -1 : 1))
        .map((region) => region.status())
    }
    const region = this.#regions.get(name)
    if (region === undefined) throw errors.regionStatusNotFound(name)
    return [region.status()]
  }

  has (name: string): boolean {
    return this.#regions.has(name)
  }

  acquire (name: string, offset: number | bigint, byteSize: number | bigint): Lease {
    try {
      return this.#acquire(name, offset, byteSize)
    } catch (error) {
      throw this.#rejected(error)
    }
  }

  #acquire (name: string, offset: number | bigint, byteSize: number | bigint): Lease {
    const region = this.#regions.get(name)
    if (region === undefined) throw errors.regionNotFound(name)
    if (!region.intact) throw errors.regionTruncated(name)
    const start = toUnsigned(offset)
    const length = toUnsigned(byteSize)
    if (start === undefined || length === undefined) throw errors.invalidUseArgs(name)
    const regionBytes = BigInt(region.byteSize)
    if (start >= regionBytes) throw errors.invalidOffset(name)
    if (length > UINT64_MAX - start) throw errors.offsetOverflow(name, length, start)
    if (start + length > regionBytes) throw errors.invalidRange(name)
    if (length > MAX_VIEW_BYTES) throw errors.leaseTooLarge(name, length, MAX_VIEW_BYTES)
    const view = region.view(Number(start), Number(length))
    region.hold()
    const range = { object: region.object, start: region.offset + Number(start) }
    return new RegionLease(name, view, Number(start), range, () => { if (region.letGo()) this.#remove(region) })
  }

  #mappedBytes (): number {
    let bytes = 0
    for (const region of this.#regions.values()) bytes += region.byteSize
    return bytes
  }

  counters (): RegistryCounters {
    const regions = [...this.#regions.values()]
    return {
      regions: regions.length,
      bytesMapped: this.#mappedBytes(),
      liveLeases: regions.reduce((leases, region) => leases + region.liveLeases, 0),
      deferredUnregisters: regions.filter((region) => region.unregisterPending).length,
      rejections: Object.fromEntries(this.#rejections)
    }
  }

  /** Unregisters everything: a request in flight keeps its regions mapped until its leases end,
   * as an unregister would, so it finishes with its views intact. Registering is refused from now on. */
  close (): void {
    this.#closed = true
    this.unregisterAll()
  }
}
