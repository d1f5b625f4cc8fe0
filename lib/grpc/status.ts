/**
 * Errors as gRPC statuses: the message stays section 2's or 4's, word for word; the code is
 * Triton's for that situation. Written once for every RPC.
 */
import type { ServiceError } from '@grpc/grpc-js'

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

/** Where Triton's gRPC code is not the one of the HTTP status. */
const BY_ERROR_CODE: Record<string, number> = {
  ERR_SHM_DUPLICATE_REGION: Status.ALREADY_EXISTS,
  ERR_SHM_UNABLE_TO_OPEN: Status.INTERNAL,
  ERR_SHM_OUTPUT_TOO_SMALL: Status.INTERNAL,
  ERR_SHM_RESTRICTED_PROTOCOL: Status.UNAVAILABLE
}

const BY_HTTP_STATUS: Record<number, number> = {
  400: Status.INVALID_ARGUMENT,
  403: Status.PERMISSION_DENIED,
  404: Status.NOT_FOUND,
  413: Status.RESOURCE_EXHAUSTED,
  429: Status.RESOURCE_EXHAUSTED,
  499: Status.CANCELLED,
  501: Status.UNIMPLEMENTED,
  503: Status.UNAVAILABLE
}

type AnsweredError = Error & { statusCode?: unknown, code?: unknown }

/** The gRPC code of an error this package answers with (an HTTP status and an `ERR_SHM_…` code). */
export function grpcCodeOf ({ statusCode, code }: { statusCode: number, code?: unknown }): number {
  return BY_ERROR_CODE[code as string] ?? BY_HTTP_STATUS[statusCode] ?? (statusCode < 500 ? Status.INVALID_ARGUMENT : Status.INTERNAL)
}

/**
 * The status to answer a failed call with. An error without an HTTP status is a bug: its message
 * may name internals, so it is logged and answered as a bare INTERNAL (never UNKNOWN).
 */
export function toServiceError (error: unknown, log?: ErrorLogger): Partial<ServiceError> {
  const { statusCode, code, message } = (error ?? {}) as AnsweredError
  if (typeof statusCode !== 'number') {
    log?.error({ err: error }, 'gRPC call failed')
    return { code: Status.INTERNAL, details: 'Internal Server Error' }
  }
  return { code: grpcCodeOf({ statusCode, code }), details: message }
}
