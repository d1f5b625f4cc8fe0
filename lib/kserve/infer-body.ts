/**
 * The body of an infer request: JSON, or (binary tensor data extension) a JSON header of
 * `Inference-Header-Content-Length` bytes followed by the inputs' raw bytes.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { InferRequestWire } from '../../types/kserve'
import * as errors from '../errors'

export const HEADER_LENGTH_HEADER = 'inference-header-content-length'

/** A parsed infer body: the JSON header and the binary section after it (empty for plain JSON). */
export class InferBody {
  constructor (readonly header: InferRequestWire, readonly binary: Buffer) {}
}

function headerLength (value: string | string[] | undefined, bodyBytes: number): number {
  const length = Number(value)
  if (typeof value !== 'string' || !/^\d+$/.test(value) || length > bodyBytes) {
    throw errors.invalidInferRequest(`'Inference-Header-Content-Length' must be an integer from 0 to ${bodyBytes}`)
  }
  return length
}

function parseHeader (json: Buffer): InferRequestWire {
  try {
    return JSON.parse(json.toString())
  } catch {
    throw errors.invalidInferRequest('the JSON is not valid')
  }
}

/** Splits and parses an infer body, given the value of its `Inference-Header-Content-Length`. */
export function parseInferBody (headerLengthValue: string | string[] | undefined, body: Buffer): InferBody {
  if (headerLengthValue === undefined) return new InferBody(parseHeader(body), body.subarray(body.length))
  const length = headerLength(headerLengthValue, body.length)
  return new InferBody(parseHeader(body.subarray(0, length)), body.subarray(length))
}

/** A Fastify content-type parser (`parseAs: 'buffer'`) that yields an `InferBody`. */
export function inferBodyParser (request: FastifyRequest, body: Buffer, done: (error: Error | null, body?: InferBody) => void) {
  try {
    done(null, parseInferBody(request.headers[HEADER_LENGTH_HEADER], body))
  } catch (error) {
    done(error as Error)
  }
}

/**
 * Makes every request of this (encapsulated) instance parse as an infer body, whatever its
 * Content-Type: clients send JSON, `application/octet-stream`, or nothing.
 */
export function useInferBodyParser (app: FastifyInstance, options: { bodyLimit?: number } = {}): void {
  app.removeAllContentTypeParsers()
  app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: options.bodyLimit }, inferBodyParser)
}
