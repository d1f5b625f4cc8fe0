/**
 * A request body as its transfer brings it, before any content coding is undone: its bytes
 * counted, and a chunked one's chunks capped, as Triton caps them, and charged one by one.
 */
import { type Readable, Transform } from 'node:stream'
import * as errors from '../errors'

/** Triton's cap on the non-empty chunks of one body (its HTTP server's `kMaxChunkedChunks`). */
export const MAX_CHUNKS = 65_536

/** `Transform` with the bytes it passed: Fastify compares them with `Content-Length`. */
export type CountedBody = Transform & { readonly receivedEncodedLength: number }

/**
 * `payload` through a stream that counts its bytes; for a `chunked` body, each piece Node's HTTP
 * parser hands over (a chunk, or the part of one a socket read brought) is counted against
 * `MAX_CHUNKS` and charged (`charge` may throw). A refused body is read no further, and Fastify
 * closes its connection once it has answered, as Triton does. The request itself is never
 * destroyed: its socket carries the answer.
 */
export function receivedBytes (payload: Readable, chunked: boolean, charge: (bytes: number) => void): CountedBody {
  let bytes = 0
  let pieces = 0
  const counted = new Transform({
    transform (chunk: Buffer, _encoding, next) {
      bytes += chunk.length
      try {
        if (chunked) {
          if (++pieces > MAX_CHUNKS) throw errors.tooManyChunks(MAX_CHUNKS)
          charge(chunk.length)
        }
        next(null, chunk)
      } catch (error) {
        next(error as Error)
      }
    }
  })
  // Fastify stops listening once it has refused a body (413): a later error must not be thrown.
  counted.on('error', () => {})
  payload.pipe(counted)
  return Object.defineProperty(counted, 'receivedEncodedLength', { get: () => bytes }) as CountedBody
}
