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

/** Small pieces of a chunked body are copied, as they come, into one buffer of this many bytes,
 * passed on when full: Node's HTTP parser hands over a chunk as a Buffer of its own (a hundred
 * bytes for a chunk of one) over the socket read that brought it; held until joined, they would
 * outlive collections, and keep those reads' memory, and the process would keep its pages. */
const JOINED_BYTES = 64 * 1024

/**
 * `payload` through a stream that counts its bytes; for a `chunked` body, each piece Node's HTTP
 * parser hands over (a chunk, or the part of one a socket read brought) is counted against
 * `MAX_CHUNKS` and charged (`charge` may throw), and small ones are joined. A refused body is read
 * and dropped until Fastify closes its connection (at once, its answer sent), as Triton reads no
 * more of it. The request itself is never destroyed: its socket carries the answer.
 */
export function receivedBytes (payload: Readable, chunked: boolean, charge: (bytes: number) => void): CountedBody {
  let bytes = 0
  let pieces = 0
  let joining = Buffer.allocUnsafe(0)
  let joined = 0
  const flushJoined = (): Buffer | undefined => {
    if (joined === 0) return undefined
    const piece = joining.subarray(0, joined)
    joined = 0
    return piece
  }
  const counted = new Transform({
    transform (chunk: Buffer, _encoding, next) {
      bytes += chunk.length
      if (!chunked) return next(null, chunk)
      try {
        if (++pieces > MAX_CHUNKS) throw errors.tooManyChunks(MAX_CHUNKS)
        charge(chunk.length)
      } catch (error) {
        return next(error as Error)
      }
      if (joined > 0 && joined + chunk.length > JOINED_BYTES) this.push(flushJoined())
      if (chunk.length >= JOINED_BYTES) return next(null, chunk)
      if (joined === 0) joining = Buffer.allocUnsafe(JOINED_BYTES)
      chunk.copy(joining, joined)
      joined += chunk.length
      next()
    },
    flush (next) {
      next(null, flushJoined())
    }
  })
  // Fastify stops listening once it has refused a body (413): a later error must not be thrown.
  counted.on('error', () => {})
  payload.pipe(counted)
  // After the pipe's own listener, which pauses the request: pieces held in a paused request would
  // outlive many collections.
  counted.once('close', () => { if (!payload.readableEnded) payload.resume() })
  return Object.defineProperty(counted, 'receivedEncodedLength', { get: () => bytes }) as CountedBody
}
