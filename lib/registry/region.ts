/**
 * A registered region as this process sees it: its mapping of part of a client's shared memory
 * object, and the leases that hold it here. A shared registration is mapped by each process at its
 * first use there.
 */
import type { SharedMemoryRegionStatus } from '../../types'
import { MappedRange } from '../addon/posix-shm'
import type { RegionRecord } from '../store/region-store'

export const regionStatus = ({ name, key, offset, byteSize }: RegionRecord): SharedMemoryRegionStatus =>
  ({ name, key, offset, byte_size: byteSize })

export class Region {
  readonly record: RegionRecord
  readonly #mapping: MappedRange
  #liveLeases = 0

  constructor (record: RegionRecord, mapping: MappedRange) {
    this.record = record
    this.#mapping = mapping
  }

  get liveLeases (): number {
    return this.#liveLeases
  }

  /** The mapped object (`<device>:<inode>`): regions of one object, under any key, share it. */
  get object (): string {
    return this.#mapping.object
  }

  /**
   * False once the client shrank its object below the region (views would read past its end). Its
   * size is measured (fstat: the costliest step of a small lease) when the region's use begins, at
   * its first lease; while leases are live, a truncation is caught where it matters: a view that
   * touches a page past the object's end reads zeros and poisons the region (the fault guard), and
   * the next lease is refused.
   */
  get intact (): boolean {
    return this.#liveLeases === 0 ? this.#mapping.intact : this.#mapping.untouchedPastEnd
  }

  /** A view of `[offset, offset + byteSize)` of the region; the caller has checked the bounds, and
   * that the view fits in one ArrayBuffer. */
  view (offset: number, byteSize: number): Uint8Array {
    // One window over the whole region where one ArrayBuffer can hold it, so a view costs no
    // native call; a larger region gives each view a window of its own over the same mapping.
    const whole = this.#mapping.whole
    return whole === undefined ? new Uint8Array(this.#mapping.window(offset, byteSize)) : new Uint8Array(whole, offset, byteSize)
  }

  hold (): void {
    this.#liveLeases++
  }

  /** Returns true when this was the last lease here. */
  letGo (): boolean {
    return --this.#liveLeases === 0
  }

  /** Unmaps now; views over the region read as empty afterwards. */
  close (): void {
    this.#mapping.unmap()
  }
}
