/**
 * A model version's instances (Triton's `instance_group` count): at most that many of its
 * requests run at once, in this process; the others wait for an instance in the order they came,
 * as they wait in Triton's scheduler queue. A request abandoned while it waits leaves the queue.
 */
export class ModelInstances {
  #free: number
  readonly #waiting: Array<() => void> = []

  constructor (count: number) {
    this.#free = count
  }

  /** Resolves once an instance is the request's, with the function that gives it back (to be
   * called once); rejects with the signal's reason if the request is abandoned first. */
  async acquire (signal: AbortSignal): Promise<() => void> {
    signal.throwIfAborted()
    if (this.#free > 0) this.#free--
    else await this.#turn(signal)
    return () => {
      // The instance passes to the request waiting longest, or is free again.
      const next = this.#waiting.shift()
      if (next === undefined) this.#free++
      else next()
    }
  }

  #turn (signal: AbortSignal): Promise<void> {
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
