/**
 * The memory bandwidth baseline: one core copying a buffer much larger than the caches
 * (`Buffer#copy`, which is memcpy). Reported two ways: bytes copied per second (what "memcpy
 * bandwidth" usually means) and bytes moved per second (read + written, 2x that), the accounting
 * the inference figure uses (inputs read + outputs written).
 */
import { median } from './stats'

export interface MemcpyResult {
  bufferBytes: number
  /** Bytes copied per second (median of the copies). */
  copiedBytesPerSecond: number
  /** Bytes read + written per second: 2 x copied. */
  movedBytesPerSecond: number
}

const BUFFER_BYTES = 64 * 1024 * 1024

export class MemcpyBaseline {
  readonly #source = Buffer.alloc(BUFFER_BYTES, 0x5a)
  readonly #target = Buffer.alloc(BUFFER_BYTES)

  constructor () {
    this.#source.copy(this.#target) // touch every page of both once
  }

  /** Seconds per copy of the whole buffer, `copies` times. */
  measure (copies: number): number[] {
    const seconds: number[] = []
    for (let copy = 0; copy < copies; copy++) {
      const started = process.hrtime.bigint()
      this.#source.copy(this.#target)
      seconds.push(Number(process.hrtime.bigint() - started) / 1e9)
    }
    return seconds
  }

  static summarize (secondsPerCopy: number[]): MemcpyResult {
    const copiedBytesPerSecond = BUFFER_BYTES / median(secondsPerCopy)
    return { bufferBytes: BUFFER_BYTES, copiedBytesPerSecond, movedBytesPerSecond: 2 * copiedBytesPerSecond }
  }
}
