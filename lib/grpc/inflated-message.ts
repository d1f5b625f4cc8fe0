/**
 * A compressed gRPC message inflated as the plugin's listener receives it: measured first
 * (inflated a chunk at a time and counted, each chunk dropped, stopping at the receive limit),
 * then charged to the in-flight budget, then inflated into one buffer of exactly its size. It
 * holds the message once. (grpc-js's own inflation keeps every chunk and concatenates them: twice
 * the message at its peak, charged to nothing.) The measure costs the message's inflation twice
 * in CPU, never in memory.
 */
import zlib from 'node:zlib'
import type { InFlightReservation } from '../../types/kserve'
import { Status } from './status'

export type Compression = 'gzip' | 'deflate'

/** A status grpc-js sends as the call's end (its own texts, as its own inflation answers). */
export interface InflationStatus { code: number, details: string }

const FAILED: InflationStatus = { code: Status.INTERNAL, details: 'Failed to decompress message' }

const tooLarge = (limit: number): InflationStatus =>
  ({ code: Status.RESOURCE_EXHAUSTED, details: `Received message that decompresses to a size larger than ${limit}` })

/** What the measure inflates at a time. */
const MEASURE_CHUNK = 64 * 1024

/** Inflates `payload` `chunkSize` bytes at a time, each chunk to `take`; rejects with
 * `take`'s status as soon as it returns one, or with grpc-js's for bytes that do not inflate. */
function inflate (payload: Buffer, compression: Compression, chunkSize: number, take: (chunk: Buffer) => InflationStatus | undefined): Promise<void> {
  const inflater = compression === 'gzip' ? zlib.createGunzip({ chunkSize }) : zlib.createInflate({ chunkSize })
  return new Promise((resolve, reject) => {
    inflater.on('data', (chunk: Buffer) => {
      const refused = take(chunk)
      if (refused === undefined) return
      inflater.destroy()
      reject(refused)
    })
    inflater.on('error', () => reject(FAILED))
    inflater.on('end', resolve)
    inflater.end(payload)
  })
}

/** How many bytes `payload` inflates to, or RESOURCE_EXHAUSTED once it passes `limit`. */
async function inflatedSize (payload: Buffer, compression: Compression, limit: number): Promise<number> {
  let size = 0
  await inflate(payload, compression, MEASURE_CHUNK, (chunk) => {
    size += chunk.length
    return size > limit ? tooLarge(limit) : undefined
  })
  return size
}

/**
 * The message `payload` inflates to, charged to `reservation` before it is allocated; rejects with
 * the status grpc-js would send (RESOURCE_EXHAUSTED past `limit`, INTERNAL for bytes that do not
 * inflate) and lets the budget's refusal through.
 */
export async function inflateMessage (payload: Buffer, compression: Compression, limit: number, reservation: InFlightReservation): Promise<Buffer> {
  const size = await inflatedSize(payload, compression, limit)
  reservation.charge(size)
  // One output buffer a byte larger than the message: zlib fills it in place, and hands it over
  // as one chunk, with no second buffer (a full one would make it allocate the next).
  const chunks: Buffer[] = []
  await inflate(payload, compression, Math.max(size + 1, zlib.constants.Z_MIN_CHUNK), (chunk) => {
    chunks.push(chunk)
    return undefined
  })
  return chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)
}
