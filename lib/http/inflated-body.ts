/**
 * A request body sent compressed (`Content-Encoding: gzip` or `deflate`), inflated as it arrives,
 * as Triton inflates it: never past its limit, each piece charged before it is passed on, so a
 * body that inflates without end (a zip bomb) costs its limit and no more.
 */
import { pipeline, Transform } from 'node:stream'
import { createUnzip } from 'node:zlib'
import * as errors from '../errors'
import type { CountedBody } from './received-bytes'

/** The content codings Triton inflates (zlib tells them apart by their header, as Triton's does). */
export type ContentCoding = 'gzip' | 'deflate'

/** What an inflated body may become. */
export interface InflateLimits {
  /** Most bytes it may inflate to. */
  maxBytes: number
  /** The error of a body that inflates past `maxBytes`. */
  tooLarge(): Error
  /** Charges a piece of inflated bytes (to the in-flight budget), or throws. */
  charge(bytes: number): void
}

/** The body `received` carries, inflated. The inflating stops at the first error, whatever it is,
 * and the stream returned fails with it (zlib's own ones as `ERR_SHM_MALFORMED_COMPRESSED_BODY`). */
export function inflatedBody (received: CountedBody, coding: ContentCoding, { maxBytes, tooLarge, charge }: InflateLimits): CountedBody {
  let inflatedBytes = 0
  const inflated = new Transform({
    transform (chunk: Buffer, _encoding, next) {
      inflatedBytes += chunk.length
      try {
        if (inflatedBytes > maxBytes) throw tooLarge()
        charge(chunk.length)
        next(null, chunk)
      } catch (error) {
        next(error as Error)
      }
    }
  })
  const inflater = createUnzip()
  // Before pipeline's own listener: the body is refused in this package's words.
  inflater.once('error', (error) => {
    inflated.destroy(received.receivedEncodedLength === 0 ? errors.nothingToDecompress() : errors.malformedCompressedBody(coding, error.message))
  })
  // Fastify stops listening once it has refused a body (413): a later error must not be thrown.
  inflated.on('error', () => {})
  pipeline(received, inflater, inflated, () => {})
  return Object.defineProperty(inflated, 'receivedEncodedLength', { get: () => received.receivedEncodedLength }) as CountedBody
}
