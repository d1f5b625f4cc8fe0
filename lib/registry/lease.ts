/** A hold on part of a region for one use; see `Lease` in types/. */
import type { Lease } from '../../types'

/** Where a lease lies in its shared memory object, whatever region and key it came through. */
export interface ObjectRange {
  /** The object, as `<device>:<inode>`. */
  object: string
  /** Offset of the lease's first byte in the object. */
  start: number
}

export class RegionLease implements Lease {
  readonly buffer: Uint8Array
  readonly regionName: string
  readonly offset: number
  readonly byteSize: number
  readonly #range: ObjectRange
  #onRelease: (() => void) | undefined

  constructor (regionName: string, buffer: Uint8Array, offset: number, range: ObjectRange, onRelease: () => void) {
    this.regionName = regionName
    this.buffer = buffer
    this.offset = offset
    this.byteSize = buffer.byteLength
    this.#range = range
    this.#onRelease = onRelease
  }

  overlaps (other: Lease): boolean {
    if (!(other instanceof RegionLease) || other.#range.object !== this.#range.object) return false
    const start = this.#range.start
    const otherStart = other.#range.start
    return this.byteSize > 0 && other.byteSize > 0 &&
      start < otherStart + other.byteSize && otherStart < start + this.byteSize
  }

  release (): void {
    const onRelease = this.#onRelease
    this.#onRelease = undefined
    onRelease?.()
  }
}
