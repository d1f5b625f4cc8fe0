/**
 * Spans of the shared memory API's calls (register, unregister), made by the model table served
 * with a registry when it traces in Triton's `opentelemetry` mode (Triton has none: this product
 * adds them, so a refused registration shows in the trace of the request that needed it).
 */

/** One call to trace: its RPC's name, the region it names, its headers or metadata (where its
 * client's trace context is read). */
export interface OperationSpanOptions {
  name: string
  region?: string
  carrier?: Readonly<Record<string, unknown>>
}

/** Starts a call's span, if calls are traced now: the function returned ends it, with the error
 * that refused the call. */
export type OperationSpans = (options: OperationSpanOptions) => ((error?: unknown) => void) | undefined
