/**
 * A number of turns taken in the order they were asked for: at most that many holders at once;
 * the others wait, first come first served, and one whose signal aborts while it waits leaves the
 * queue at once. (The signal is asked for only by a caller that waits: a request's is made when
 * first read, and costs more than the rest of a turn.) What a model's instances (Triton's `instance_group` count) and the ONNX runner's
 * concurrency both are.
 */
export class Turns {
  #free: number
  readonly #waiting: Array<() => void> = []

  constructor (count: number) {
    this.#free = count
  }

  /** Resolves once a turn is the caller's, with the function that gives it back (to be called
   * once); rejects with the reason of the signal `signalOf` gives if it aborts while the caller waits. */
  async take (signalOf: () => AbortSignal): Promise<() => void> {
    if (this.#free > 0) this.#free--
    else await this.#turn(signalOf())
    return () => {
      // The turn passes to the caller waiting longest, or is free again.
      const next = this.#waiting.shift()
      if (next === undefined) this.#free++
      else next()
    }
  }

  #turn (signal: AbortSignal): Promise<void> {
    signal.throwIfAborted()
    return new Promise<void>((resolve, reject) => {
      const take = () => {
        signal.removeEventListener('abort', leave)
        resolve()
      }
      const leave = () => {
        this.#waiting.splice(this.#waiting.indexOf(take), 1)
        reject(signal.reason)
      }
      signal.addEventListener('abort', leave, { once: true })
      this.#waiting.push(take)
    })
  }
}
