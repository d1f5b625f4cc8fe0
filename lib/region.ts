/**
 * One registered region: a mapping of part of a client's shared memory object, the leases that
 * hold it, and whether its unregister is waiting for them.
 */
import type { SharedMemoryRegionStatus } from '../types'
import { isIntact, mapObject, unmapObject } from './posix-shm'

export class Region {
  readonly name: string
  readonly key: string
  readonly offset: number
  readonly byteSize: number
  /** The mapping; detached (length 0) once the region is closed. */
  readonly #mapping: ArrayBuffer
  #liveLeases = 0
  /** Set by an unregister that found live leases: the last release closes the region. */
  unregisterPending = false

  constructor (name: string, key: string, offset: number, byteSize: number) {
    this.name = name
    this.key = key
    this.offset = offset
    this.byteSize = byteSize
    this.#mapping = mapObject(key, offset, byteSize)
  }

  get liveLeases (): number {
    return this.#liveLeases
  }

  /** False once the client shrank its object below the region (views would read past its end). */
  get intact (): boolean {
    return isIntact(this.#mapping)
  }

  /** A view of `[offset, offset + byteSize)` of the region; the caller has checked the bounds. */
  view (offset: number, byteSize: number): Uint8Array {
    return new Uint8Array(this.#mapping, offset, byteSize)
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
    unmapObject(this.#mapping)
  }

  status (): SharedMemoryRegionStatus {
    return { name: this.name, key: this.key, offset: this.offset, byte_size: this.byteSize }
  }
}
