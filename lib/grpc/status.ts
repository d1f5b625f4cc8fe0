/**
 * Errors as gRPC statuses, written once for every RPC: the message stays the core's (Triton's,
 * word for word), and the code is the one Triton answers for the error's kind.
 */
import type { ServiceError } from '@grpc/grpc-js'
import { type AnsweredKind, TritonError } from '../errors'

/** The part of a pino / Fastify logger a failed call is logged to. */
export interface ErrorLogger {
  error(object: object, message: string): void
}

/** gRPC status codes (the wire protocol's numbers; grpc-js's `status` enum has the same). */
export const Status = {
  OK: 0,
  CANCELLED: 1,
  INVALID_ARGUMENT: 3,
  NOT_FOUND: 5,
  ALREADY_EXISTS: 6,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14
} as const

/** Each kind's code, as Triton answers it (its restricted protocol is UNAVAILABLE, and what it
 * reports as INTERNAL the HTTP face answers as the client's doing). */
export const GRPC_CODE: Readonly<Record<AnsweredKind, number>> = {
  invalid: Status.INVALID_ARGUMENT,
  exists: Status.ALREADY_EXISTS,
  'not-found': Status.NOT_FOUND,
  unusable: Status.INTERNAL,
  denied: Status.PERMISSION_DENIED,
  restricted: Status.UNAVAILABLE,
  unsupported: Status.UNIMPLEMENTED,
  unavailable: Status.UNAVAILABLE,
  exhausted: Status.RESOURCE_EXHAUSTED,
  cancelled: Status.CANCELLED,
  internal: Status.INTERNAL,
  'method-not-allowed': Status.UNIMPLEMENTED,
  'too-long': Status.INVALID_ARGUMENT
}

/** An HTTP error of a host's own code (thrown by its `beforeRun` or model, e.g. @fastify/error's),
 * by its status: the nearest gRPC code. */
const BY_HTTP_STATUS: Record<number, number> = {
  403: Status.PERMISSION_DENIED,
  404: Status.NOT_FOUND,
  409: Status.ALREADY_EXISTS,
  413: Status.RESOURCE_EXHAUSTED,
  429: Status.RESOURCE_EXHAUSTED,
  499: Status.CANCELLED,
  501: Status.UNIMPLEMENTED,
  503: Status.UNAVAILABLE
}

const isHttpError = (status: unknown): status is number => Number.isInteger(status) && (status as number) >= 400 && (status as number) <= 599

/**
 * The status to answer a failed call with. An error that is neither this package's nor an HTTP
 * error is a bug: its message may name internals, so it is logged and answered as a bare INTERNAL
 * (never UNKNOWN).
 */
export function toServiceError (error: unknown, log?: ErrorLogger): Partial<ServiceError> {
  if (error instanceof TritonError) return { code: GRPC_CODE[error.kind], details: error.message }
  const { statusCode, message } = (error ?? {}) as { statusCode?: unknown, message?: string }
  if (isHttpError(statusCode)) {
    return { code: BY_HTTP_STATUS[statusCode] ?? (statusCode < 500 ? Status.INVALID_ARGUMENT : Status.INTERNAL), details: message }
  }
  log?.error({ err: error }, 'gRPC call failed')
  return { code: Status.INTERNAL, details: 'Internal Server Error' }
}
