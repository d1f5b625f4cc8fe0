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
   * Whether `[offset, offset + byteSize)` of the region still lies inside its object, or the client
   * shrank the object below it (views would read past its end): its last byte is read, which costs
   * no system call (`MappedRange.reaches`). A range past the end poisons the whole region, and every
   * later lease of it is refused; an empty range answers for the region as far as is known.
   */
  reaches (offset: number, byteSize: number): boolean {
    return byteSize === 0 ? this.#mapping.untouchedPastEnd : this.#mapping.reaches(offset + byteSize - 1)
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
