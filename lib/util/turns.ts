/**
 * A number of turns taken in the order they were asked for: at most that many holders at once;
 * the others wait, first come first served, and one whose signal aborts while it waits leaves the
 * queue at once. What a model's instances (Triton's `instance_group` count) and the ONNX runner's
 * concurrency both are.
 */
export class Turns {
  #free: number
  readonly #waiting: Array<() => void> = []

  constructor (count: number) {
    this.#free = count
  }

  /** Resolves once a turn is the caller's, with the function that gives it back (to be called
   * once); rejects with the signal's reason if it aborts while the caller waits. */
  async take (signal: AbortSignal): Promise<() => void> {
    if (this.#free > 0) this.#free--
    else await this.#turn(signal)
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
