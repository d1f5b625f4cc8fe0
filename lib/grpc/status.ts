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

/** The most bytes of an error's text a status carries once percent-encoded, as its trailer sends
 * it. A trailer past the peer's header limit (16 KiB is common; Node refuses to send one past 64
 * KiB) is never sent: the call hangs until its deadline, and Node leaves the connection's header
 * compression out of step, so the next call on it hangs too. Triton's own texts are short: what
 * makes one long is a name or shape it echoes. */
export const MAX_DETAILS_BYTES = 2048

const encodedLength = (text: string): number => encodeURI(text).length

/** A lone surrogate cannot be percent-encoded (grpc-js would throw sending it): U+FFFD instead. */
const wellFormed = (text: string): string => text.replace(/\p{Cs}/gu, '\uFFFD')

/** The first characters of `text` whose encoding takes at most `budget` bytes (or its last, `fromEnd`). */
function within (text: string, budget: number, fromEnd = false): string {
  // A character takes one byte at least: no more than `budget` of them can fit.
  const characters = [...wellFormed(text.slice(fromEnd ? -budget : 0, fromEnd ? undefined : budget))]
  if (fromEnd) characters.reverse()
  let kept = 0
  let used = 0
  for (const character of characters) {
    used += encodedLength(character)
    if (used > budget) break
    kept++
  }
  const chosen = characters.slice(0, kept)
  return (fromEnd ? chosen.reverse() : chosen).join('')
}

/** `message` as a status can carry it: whole when it fits, else its start and its end (where
 * Triton's texts say what happened) around a note of how much was left out. */
export function statusDetails (message: string): string {
  const text = wellFormed(message)
  if (text.length * 9 <= MAX_DETAILS_BYTES || encodedLength(text) <= MAX_DETAILS_BYTES) return text
  const head = within(text, (MAX_DETAILS_BYTES * 3) / 4 - 64)
  const tail = within(text, MAX_DETAILS_BYTES / 4 - 64, true)
  return `${head}...(${text.length - head.length - tail.length} characters not shown)...${tail}`
}

/**
 * The status to answer a failed call with, its text cut to what a trailer carries. An error that is
 * neither this package's nor an HTTP error is a bug: its message may name internals, so it is
 * logged and answered as a bare INTERNAL (never UNKNOWN).
 */
export function toServiceError (error: unknown, log?: ErrorLogger): Partial<ServiceError> {
  if (error instanceof TritonError) return { code: GRPC_CODE[error.kind], details: statusDetails(error.message) }
  const { statusCode, message } = (error ?? {}) as { statusCode?: unknown, message?: string }
  if (isHttpError(statusCode)) {
    const code = BY_HTTP_STATUS[statusCode] ?? (statusCode < 500 ? Status.INVALID_ARGUMENT : Status.INTERNAL)
    return { code, details: message === undefined ? undefined : statusDetails(message) }
  }
  log?.error({ err: error }, 'gRPC call failed')
  return { code: Status.INTERNAL, details: 'Internal Server Error' }
}
