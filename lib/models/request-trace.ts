/**
 * The trace of one sampled request while it is taken: what the table and the face that received
 * the request (Triton's core and its HTTP or gRPC server: face-trace.ts) add to it, the same in
 * both trace modes. A trace file's (file-trace.ts) writes Triton's objects; OpenTelemetry's
 * (request-spans.ts) makes spans of them. Either is done once each holder has ended it, an
 * ensemble's with the traces of its steps (its children).
 */

/** What the table tells of the request a trace follows. */
export interface TracedRequest {
  model: string
  /** The version that ran (an integer, as Triton writes it). */
  version: string
  /** The request's id, if the client gave one. */
  requestId?: string
}

export interface RequestTrace {
  /** Triton's trace id. */
  readonly id: number
  /** Adds the request's description (Triton writes it with its REQUEST_START). */
  describe(request: TracedRequest): void
  /** Adds one instant (`performance.now()`), named as Triton names it. */
  stamp(name: string, instant: number): void
  /** The request failed with `error` (a trace file writes the instants alone). */
  fail(error: unknown): void
  /** One more holder (the face, or a step's trace): the trace is done once each has ended it. */
  hold(): void
  /** Ends one holder's part. */
  end(): void
  /** The trace of a step of this (ensemble's) request, numbered `id`: done with this one. */
  child(id: number): RequestTrace
}
