/**
 * Work its caller may give up on while it waits (an `InferRequest` is one): what a queue needs to
 * let a waiter go at once, without an `AbortSignal` (a request's is made only when read, and costs
 * more than the wait it would end).
 */
export interface Abandonable {
  /** Throws the reason once the work is abandoned. */
  throwIfAbandoned(): void
  /** Calls `listener` with the reason once the work is abandoned (at once if it is); returns the
   * way to stop listening. */
  onAbandoned(listener: (reason: Error) => void): () => void
}
