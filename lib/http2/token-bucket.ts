/**
 * A rate with a burst: `take()` succeeds while tokens are left, and tokens come back at `perSecond`
 * up to `burst`. What bounds a client's streams reset before their answers (RFC 9113 §10.5's
 * "rapid reset"): each one may have begun work that its reset does not undo at once.
 */
export class TokenBucket {
  readonly #burst: number
  readonly #perMillisecond: number
  #tokens: number
  #updated = performance.now()

  constructor (burst: number, perSecond: number) {
    this.#burst = burst
    this.#perMillisecond = perSecond / 1000
    this.#tokens = burst
  }

  take (): boolean {
    const now = performance.now()
    this.#tokens = Math.min(this.#burst, this.#tokens + (now - this.#updated) * this.#perMillisecond)
    this.#updated = now
    if (this.#tokens < 1) return false
    this.#tokens--
    return true
  }
}
