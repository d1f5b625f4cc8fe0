/**
 * The bytes all infer requests in flight of one process hold together, whatever transport brought
 * them: each request charges its reservation before it allocates (its body, its decoded message,
 * its output storage, its answer) and gives it all back when its transport ends it. One budget per
 * registry, so the HTTP routes and the gRPC listener of a service share it.
 */
import { getHeapStatistics } from 'node:v8'
import type { InFlightBudget, InFlightReservation } from '../../types/kserve'
import * as errors from '../errors'

const GiB = 1024 ** 3

/** 1 GiB, or half the V8 heap limit where that is less: parsed JSON and decoded messages live on
 * the heap, and a budget the heap cannot hold would let requests exhaust it before they are refused. */
export const DEFAULT_MAX_IN_FLIGHT_BYTES = Math.min(GiB, Math.floor(getHeapStatistics().heap_size_limit / 2))

export class InFlightBytes implements InFlightBudget {
  #held = 0
  #peak = 0

  constructor (readonly maxBytes: number = DEFAULT_MAX_IN_FLIGHT_BYTES) {}

  get heldBytes (): number {
    return this.#held
  }

  get peakBytes (): number {
    return this.#peak
  }

  open (): InFlightReservation {
    return new Reservation(this.#take, this.#give)
  }

  /** Takes `bytes` more for a request that holds `holding`, or refuses them. */
  readonly #take = (holding: number, bytes: number): void => {
    if (holding + bytes > this.maxBytes) throw errors.inFlightTooLarge(holding + bytes, this.maxBytes)
    if (this.#held + bytes > this.maxBytes) throw errors.serverBusy(this.#held, this.maxBytes, bytes)
    this.#held += bytes
    this.#peak = Math.max(this.#peak, this.#held)
  }

  readonly #give = (bytes: number): void => {
    this.#held -= bytes
  }
}

class Reservation implements InFlightReservation {
  #bytes = 0
  #released = false

  constructor (private readonly take: (holding: number, bytes: number) => void, private readonly give: (bytes: number) => void) {}

  get bytes (): number {
    return this.#bytes
  }

  charge (bytes: number): void {
    // A request over (its client gone) holds nothing from then on: what it still allocates is
    // garbage once its handler returns.
    if (this.#released || !(bytes > 0)) return
    this.take(this.#bytes, bytes)
    this.#bytes += bytes
  }

  release (): void {
    if (this.#released) return
    this.#released = true
    this.give(this.#bytes)
    this.#bytes = 0
  }
}
