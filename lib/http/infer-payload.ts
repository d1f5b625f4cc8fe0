/**
 * An infer body as the parser reads it, taken as Triton's HTTP server takes it: a compressed one
 * (`Content-Encoding: gzip` or `deflate`) inflated, another coding refused; a chunked one refused
 * past 65 536 chunks. With an in-flight budget, everything it holds is charged before it is read:
 * a declared length at once, a chunked body chunk by chunk, an inflated one as it grows.
 */
import type { Readable } from 'node:stream'
import { errorCodes, type FastifyReply, type FastifyRequest } from 'fastify'
import type { InFlightBudget, InFlightReservation } from '../../types/kserve'
import * as errors from '../errors'
import { reservationOf } from './in-flight'
import { type ContentCoding, inflatedBody, type InflateLimits } from './inflated-body'
import { HEADER_LENGTH_HEADER } from './infer-headers'
import { isJsonBodyRoute } from './json-body-route'
import { receivedBytes } from './received-bytes'

export interface PayloadLimits {
  bodyLimit: number
  jsonLimit: number
  inFlight?: InFlightBudget
}

/** The coding of a request's body: none (or `identity`), gzip or deflate; any other is refused,
 * telling the client which it may use, as Triton does. */
function contentCodingOf (request: FastifyRequest, reply: FastifyReply): ContentCoding | undefined {
  const value = request.headers['content-encoding']?.trim().toLowerCase()
  if (value === undefined || value === '' || value === 'identity') return undefined
  if (value === 'gzip' || value === 'deflate') return value
  reply.header('accept-encoding', 'gzip, deflate')
  throw errors.unsupportedCompression()
}

/** What a compressed body may inflate to: as much as the same body sent plain. A JSON or raw one
 * (no binary section) is all Triton's input size (`jsonLimit`), refused in Triton's words; any
 * other, `bodyLimit`, refused as Fastify refuses a plain body past it. */
function inflateLimits (request: FastifyRequest, { bodyLimit, jsonLimit }: PayloadLimits, reservation?: InFlightReservation): InflateLimits {
  const headerLength = request.headers[HEADER_LENGTH_HEADER]
  const jsonOrRaw = headerLength === undefined || headerLength === '0' || isJsonBodyRoute(request)
  const charge = (bytes: number) => reservation?.charge(bytes)
  if (jsonOrRaw && jsonLimit <= bodyLimit) return { maxBytes: jsonLimit, tooLarge: () => errors.decompressedTooLarge(jsonLimit), charge }
  return { maxBytes: bodyLimit, tooLarge: () => new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE(), charge }
}

/** A request without a body: an infer request (a POST) that says it is compressed has nothing to
 * be decompressed, as Triton answers; any other is not read. */
function noBody (request: FastifyRequest, reply: FastifyReply, payload: Readable): Readable {
  if (request.method === 'POST' && contentCodingOf(request, reply) !== undefined) throw errors.nothingToDecompress()
  return payload
}

/** A JSON body past Triton's input size, refused before a byte of it is read: the connection is
 * closed once the answer is sent, as Fastify closes it past `bodyLimit` (the client is sending the
 * body anyway). */
function jsonBodyTooLarge (reply: FastifyReply, byteSize: number, jsonLimit: number): Error {
  reply.header('connection', 'close')
  return errors.jsonRequestTooLarge(byteSize, jsonLimit)
}

/** The body of `request` as the parser reads it (see the module's comment). */
function payloadOf (request: FastifyRequest, reply: FastifyReply, payload: Readable, limits: PayloadLimits): Readable {
  const { bodyLimit, jsonLimit, inFlight } = limits
  const declared = request.headers['content-length']
  const chunked = declared === undefined && request.headers['transfer-encoding'] !== undefined
  if (!chunked && Number(declared ?? 0) === 0) return noBody(request, reply, payload)
  const coding = contentCodingOf(request, reply)
  const reservation = inFlight === undefined ? undefined : reservationOf(request, reply, inFlight)
  if (!chunked) {
    if (coding === undefined && isJsonBodyRoute(request) && Number(declared) > jsonLimit) throw jsonBodyTooLarge(reply, Number(declared), jsonLimit)
    // Past bodyLimit, Fastify refuses the body before it reads a byte of it.
    if (Number(declared) > bodyLimit) return payload
    reservation?.charge(Number(declared))
    if (coding === undefined) return payload
  }
  const received = receivedBytes(payload, chunked, (bytes) => reservation?.charge(bytes))
  return coding === undefined ? received : inflatedBody(received, coding, inflateLimits(request, limits, reservation))
}

/** A `preParsing` hook reading each request's body as above (a body over `bodyLimit` is left to
 * Fastify's 413; a JSON body route's over `jsonLimit` is refused in Triton's words). A callback
 * hook, not an async one: Fastify goes on in the same turn, where a promise would cost every
 * request a turn of the microtask queue. */
export function inferPayload (limits: PayloadLimits) {
  return (request: FastifyRequest, reply: FastifyReply, payload: Readable, done: (error: Error | null, payload?: Readable) => void): void => {
    let read: Readable
    try {
      read = payloadOf(request, reply, payload, limits)
    } catch (error) {
      done(error as Error)
      return
    }
    done(null, read)
  }
}
