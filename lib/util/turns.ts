import type { Abandonable } from './abandonable'

/**
 * A number of turns taken in the order they were asked for: at most that many holders at once;
 * the others wait, first come first served, and one abandoned while it waits leaves the queue at
 * once. What a model's instances (Triton's `instance_group` count) and the ONNX runner's
 * concurrency both are.
 */
export class Turns {
  #free: number
  readonly #waiting: Array<() => void> = []

  constructor (count: number) {
    this.#free = count
  }

  /** Resolves once a turn is the caller's, with the function that gives it back (to be called
   * once); rejects with the reason `waiter` is abandoned for if it is while it waits. */
  async take (waiter: Abandonable): Promise<() => void> {
    if (this.#free > 0) this.#free--
    else await this.#turn(waiter)
    return () => {
      // The turn passes to the caller waiting longest, or is free again.
      const next = this.#waiting.shift()
      if (next === undefined) this.#free++
      else next()
    }
  }

  #turn (waiter: Abandonable): Promise<void> {
    waiter.throwIfAbandoned()
    return new Promise<void>((resolve, reject) => {
      const take = () => {
        stopListening()
        resolve()
      }
      this.#waiting.push(take)
      const stopListening = waiter.onAbandoned((reason) => {
        this.#waiting.splice(this.#waiting.indexOf(take), 1)
        reject(reason)
      })
    })
  }
}
