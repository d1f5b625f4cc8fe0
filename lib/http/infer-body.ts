/**
 * The body of an infer request: JSON, or (binary tensor data extension) a JSON header of
 * `Inference-Header-Content-Length` bytes followed by the inputs' raw bytes, or (Triton's raw
 * request: a header length of 0, or no body) the data of the model's single input. Sent as it is,
 * or compressed (`Content-Encoding: gzip` or `deflate`), in one piece or chunked.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { InferRequestWire, InFlightBudget, InFlightReservation } from '../../types/kserve'
import * as errors from '../errors'
import { DEFAULT_JSON_LIMIT } from '../kserve/infer-limits'
import { PARSED_JSON_MULTIPLE, reservationIn } from './in-flight'
import { inferPayload } from './infer-payload'
import { HEADER_LENGTH_HEADER } from './infer-headers'
import { isJsonBodyRoute } from './json-body-route'

export { HEADER_LENGTH_HEADER } from './infer-headers'

/** A parsed infer body: the JSON header and the binary section after it (empty for plain JSON);
 * a raw request (Triton's: no JSON at all) has no header, and its binary section is the data of
 * the model's single input. */
export class InferBody {
  constructor (readonly header: InferRequestWire | undefined, readonly binary: Buffer) {}
}

function headerLength (value: string | string[] | undefined, bodyBytes: number): number {
  const length = Number(value)
  if (typeof value !== 'string' || !/^\d+$/.test(value) || length > bodyBytes) {
    throw errors.invalidInferRequest(`'Inference-Header-Content-Length' must be an integer from 0 to ${bodyBytes}`)
  }
  return length
}

/** Options of the infer body parser. */
export interface InferBodyOptions {
  /** Largest body, JSON and binary data together, in bytes (Fastify's `bodyLimit` by default). */
  bodyLimit?: number
  /**
   * Triton's `--http-max-input-size` (default 64 MiB, as Triton's): the largest JSON part, the
   * largest raw request, and what a compressed JSON or raw body may inflate to, in bytes. JSON
   * arrays of numbers take several times their text in memory once parsed; binary data and shared
   * memory do not.
   */
  jsonLimit?: number
  /**
   * What all requests in flight may hold together (`app.systemSharedMemory.inFlight`): each body
   * is charged to it before it is read (a compressed one as it is inflated too), and its JSON
   * before it is parsed; `readInferRequest` and `inferResponse` go on charging the request's
   * outputs and answer, and everything is given back when the reply closes. Default: none,
   * nothing charged.
   */
  inFlight?: InFlightBudget
}

function parseHeader (json: Buffer, jsonLimit: number, reservation?: InFlightReservation): InferRequestWire {
  if (json.length > jsonLimit) throw errors.jsonRequestTooLarge(json.length, jsonLimit)
  reservation?.charge(PARSED_JSON_MULTIPLE * json.length)
  try {
    return JSON.parse(json.toString())
  } catch {
    throw errors.invalidInferRequest('the JSON is not valid')
  }
}

/** Splits and parses an infer body, given the value of its `Inference-Header-Content-Length`;
 * its parsed JSON is charged to `reservation` first. A length of 0, or an empty body without one,
 * is Triton's raw request. */
export function parseInferBody (headerLengthValue: string | string[] | undefined, body: Buffer,
  jsonLimit = DEFAULT_JSON_LIMIT, reservation?: InFlightReservation): InferBody {
  const length = headerLengthValue === undefined ? body.length : headerLength(headerLengthValue, body.length)
  if (length === 0) {
    if (body.length > jsonLimit) throw errors.rawInputTooLarge(body.length, jsonLimit)
    return new InferBody(undefined, body)
  }
  return new InferBody(parseHeader(body.subarray(0, length), jsonLimit, reservation), body.subarray(length))
}

/** A Fastify content-type parser (`parseAs: 'buffer'`) that yields an `InferBody` (a JSON body
 * route's: all JSON, see `JSON_BODY_CONFIG`). */
export function inferBodyParser (request: FastifyRequest, body: Buffer, done: (error: Error | null, body?: InferBody) => void,
  jsonLimit = DEFAULT_JSON_LIMIT) {
  try {
    if (isJsonBodyRoute(request)) return done(null, new InferBody(parseHeader(body, jsonLimit, reservationIn(request)), Buffer.alloc(0)))
    done(null, parseInferBody(request.headers[HEADER_LENGTH_HEADER], body, jsonLimit, reservationIn(request)))
  } catch (error) {
    done(error as Error)
  }
}

/**
 * Makes every request of this (encapsulated) instance parse as an infer body, whatever its
 * Content-Type: clients send JSON, `application/octet-stream`, or nothing. Bodies are read as
 * Triton reads them (`inferPayload`): compressed ones inflated, chunked ones at most 65 536 chunks.
 */
export function useInferBodyParser (app: FastifyInstance, options: InferBodyOptions = {}): void {
  const { bodyLimit, jsonLimit = DEFAULT_JSON_LIMIT, inFlight } = options
  app.addHook('preParsing', inferPayload({ bodyLimit: bodyLimit ?? app.initialConfig.bodyLimit as number, jsonLimit, inFlight }))
  app.removeAllContentTypeParsers()
  const parse = (request: FastifyRequest, body: Buffer, done: (error: Error | null, body?: InferBody) => void) =>
    inferBodyParser(request, body, done, jsonLimit)
  // The types clients send are named too: Fastify remembers the parser of a type it found by name,
  // and parses the Content-Type header of every request that only the catch-all takes.
  for (const type of ['application/json', 'application/octet-stream', '*']) app.addContentTypeParser(type, { parseAs: 'buffer', bodyLimit }, parse)
}
