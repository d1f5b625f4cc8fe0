/**
 * One registered region: a mapping of part of a client's shared memory object, the leases that
 * hold it, and whether its unregister is waiting for them.
 */
import type { SharedMemoryRegionStatus } from '../types'
import { MappedRange } from './posix-shm'

export class Region {
  readonly name: string
  readonly key: string
  readonly offset: number
  readonly byteSize: number
  readonly #mapping: MappedRange
  /** One window over the whole region where one ArrayBuffer can hold it, so a view costs no native
   * call; a larger region gives each view a window of its own over the same mapping. */
  readonly #whole: ArrayBuffer | undefined
  #liveLeases = 0
  /** Set by an unregister that found live leases: the last release closes the region. */
  unregisterPending = false

  constructor (name: string, key: string, offset: number, byteSize: number) {
    this.name = name
    this.key = key
    this.offset = offset
    this.byteSize = byteSize
    this.#mapping = new MappedRange(key, offset, byteSize)
    this.#whole = byteSize <= MappedRange.maxWindowBytes ? this.#mapping.window(0, byteSize) : undefined
  }

  get liveLeases (): number {
    return this.#liveLeases
  }

  /** The mapped object (`<device>:<inode>`): regions of one object, under any key, share it. */
  get object (): string {
    return this.#mapping.object
  }

  /** False once the client shrank its object below the region (views would read past its end). */
  get intact (): boolean {
    return this.#mapping.intact
  }

  /** A view of `[offset, offset + byteSize)` of the region; the caller has checked the bounds, and
   * that the view fits in one ArrayBuffer. */
  view (offset: number, byteSize: number): Uint8Array {
    if (this.#whole !== undefined) return new Uint8Array(this.#whole, offset, byteSize)
    return new Uint8Array(this.#mapping.window(offset, byteSize))
  }

  hold (): void {
    this.#liveLeases++
  }

  /** Returns true when this was the last lease of a region whose unregister is pending. */
  letGo (): boolean {
    this.#liveLeases--
    return this.#liveLeases === 0 && this.unregisterPending
  }

  /** Unmaps now; views over the region read as empty afterwards. */
  close (): void {
    this.#mapping.unmap()
  }

  status (): SharedMemoryRegionStatus {
    return { name: this.name, key: this.key, offset: this.offset, byte_size: this.byteSize }
  }
}
