/** A hold on part of a region for one use; see `Lease` in types/. */
import type { Lease } from '../types'

export class RegionLease implements Lease {
  readonly buffer: Uint8Array
  readonly regionName: string
  readonly offset: number
  readonly byteSize: number
  #onRelease: (() => void) | undefined

  constructor (regionName: string, buffer: Uint8Array, offset: number, onRelease: () => void) {
    this.regionName = regionName
    this.buffer = buffer
    this.offset = offset
    this.byteSize = buffer.byteLength
    this.#onRelease = onRelease
  }

  release (): void {
    const onRelease = this.#onRelease
    this.#onRelease = undefined
    onRelease?.()
  }
}
