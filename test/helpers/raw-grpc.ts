/**
 * gRPC calls over raw HTTP/2 (node:http2), for what grpc-js will not send: messages built byte by
 * byte (a packed field of a hundred million zeros costs its bytes here, not an array of numbers),
 * messages compressed with gzip or deflate as the client chooses, and a client that stops reading
 * its answer. Sessions are closed when the test ends.
 */
import { once } from 'node:events'
import http2 from 'node:http2'
import { deflateSync, gzipSync } from 'node:zlib'
import type { FastifyInstance } from 'fastify'
import type { Test } from 'tap'
import { inferenceService } from '../../lib/grpc'
import { makeMappedObject, registerRegion } from './kserve'
import { bounded } from './sync'

// Protocol buffers' wire format, as much of it as the tests write

export const varint = (value: number | bigint): Buffer => {
  let rest = BigInt.asUintN(64, BigInt(value))
  const bytes: number[] = []
  do {
    const low = Number(rest & 0x7fn)
    rest >>= 7n
    bytes.push(rest === 0n ? low : low | 0x80)
  } while (rest !== 0n)
  return Buffer.from(bytes)
}

/** A length-delimited field (wire type 2): strings, bytes, messages, packed repeated numbers. */
export const delimited = (field: number, payload: Buffer | string): Buffer => {
  const bytes = typeof payload === 'string' ? Buffer.from(payload) : payload
  return Buffer.concat([varint((field << 3) | 2), varint(bytes.length), bytes])
}

/** A varint field (wire type 0). */
export const varintField = (field: number, value: number | bigint): Buffer => Buffer.concat([varint(field << 3), varint(value)])

export type Compression = 'identity' | 'gzip' | 'deflate'

export interface RawAnswer {
  /** `grpc-status`, or undefined when the call ended without one. */
  status?: number
  details?: string
  /** Bytes of the answer's DATA frames. */
  received: number
  /** Why the stream ended without a status (`close` with its RST code, a session error). */
  ended?: string
}

/** Records a call's status into `answer`, from its headers (a trailers-only answer) or trailers. */
function recordStatus (stream: http2.ClientHttp2Stream, answer: RawAnswer): void {
  const headers = (fields: http2.IncomingHttpHeaders) => {
    if (fields['grpc-status'] === undefined) return
    answer.status = Number(fields['grpc-status'])
    answer.details = decodeURIComponent(String(fields['grpc-message'] ?? ''))
  }
  stream.on('response', headers)
  stream.on('trailers', headers)
}

export interface RawCallOptions {
  compression?: Compression
  metadata?: Record<string, string>
  /** Stop reading the answer once this many bytes arrived (the stream is paused, never resumed). */
  stopReadingAfter?: number
  /** Called once the client stopped reading. */
  onStopped?: () => void
}

/** A length-prefixed gRPC message: its flag byte says whether it is compressed. */
export function framed (message: Buffer, compression: Compression = 'identity'): Buffer {
  const payload = compression === 'gzip' ? gzipSync(message) : compression === 'deflate' ? deflateSync(message) : message
  const prefix = Buffer.alloc(5)
  prefix.writeUInt8(compression === 'identity' ? 0 : 1, 0)
  prefix.writeUInt32BE(payload.length, 1)
  return Buffer.concat([prefix, payload])
}

export interface RawGrpc {
  session: http2.ClientHttp2Session
  /** Calls `inference.GRPCInferenceService/<method>` with `body` (a whole frame, see `framed`). */
  call(method: string, body: Buffer, options?: RawCallOptions): Promise<RawAnswer>
}

/** An HTTP/2 session to a gRPC server on 127.0.0.1:`port`. */
export function rawGrpc (t: Test, port: number): RawGrpc {
  const session = http2.connect(`http://127.0.0.1:${port}`)
  session.on('error', () => {}) // a session the server drops: each call reports its own end
  t.teardown(() => { session.destroy() })
  const call = (method: string, body: Buffer, options: RawCallOptions = {}) => new Promise<RawAnswer>((resolve) => {
    const { compression = 'identity', metadata = {}, stopReadingAfter } = options
    if (session.destroyed || session.closed) return resolve({ received: 0, ended: 'the session is closed' })
    const stream = session.request({
      ':method': 'POST',
      ':path': `/inference.GRPCInferenceService/${method}`,
      'content-type': 'application/grpc',
      te: 'trailers',
      ...(compression !== 'identity' && { 'grpc-encoding': compression }),
      ...metadata
    })
    const answer: RawAnswer = { received: 0 }
    recordStatus(stream, answer)
    stream.on('data', (chunk: Buffer) => {
      answer.received += chunk.length
      if (stopReadingAfter !== undefined && answer.received >= stopReadingAfter && !stream.isPaused()) {
        stream.pause()
        options.onStopped?.()
      }
    })
    stream.on('error', (error: Error) => { answer.ended = (error as { code?: string }).code ?? error.message })
    stream.on('close', () => {
      answer.ended ??= answer.status === undefined ? `closed, RST code ${stream.rstCode}` : undefined
      resolve(answer)
    })
    send(stream, body).catch(() => {}) // the stream's own events tell the outcome
  })
  return { session, call }
}

/** Writes `body` as a client does, as fast as the stream takes it (HTTP/2 flow control), then ends
 * the stream; stops if the server ends it first. */
async function send (stream: http2.ClientHttp2Stream, body: Buffer): Promise<void> {
  const chunk = 64 * 1024
  for (let offset = 0; offset < body.length; offset += chunk) {
    if (stream.destroyed || stream.writableEnded) return
    if (stream.write(body.subarray(offset, offset + chunk))) continue
    const waiting = new AbortController()
    await Promise.race([once(stream, 'drain', waiting), once(stream, 'close', waiting)]).catch(() => {})
    waiting.abort()
  }
  if (!stream.destroyed) stream.end()
}

/**
 * The two ways a client keeps ModelInfer calls open against a server that would end them: one
 * stops reading its answer (`stalled`, once it has), another sends the first bytes of a message
 * and never the rest.
 */
export async function holdCallsOpen (raw: RawGrpc, request: Buffer): Promise<{ stalled: Promise<RawAnswer> }> {
  let stopped = () => {}
  const reading = new Promise<void>((resolve) => { stopped = resolve })
  const stalled = raw.call('ModelInfer', framed(request), { stopReadingAfter: 1, onStopped: stopped })
  await reading
  const unfinished = raw.session.request({ ':method': 'POST', ':path': '/inference.GRPCInferenceService/ModelInfer', 'content-type': 'application/grpc', te: 'trailers' })
  unfinished.on('error', () => {})
  unfinished.write(Buffer.from([0, 0, 0, 1, 0]))
  return { stalled }
}

export interface RawStream {
  /** Writes one framed message; `written` counts it once HTTP/2 has sent all of it. */
  write(frame: Buffer): void
  /** Messages whose bytes HTTP/2 has sent whole, and how many bytes those were. */
  readonly written: { messages: number, bytes: number }
  /** Messages of the answer received so far. */
  readonly received: number
  /** Resolves once `count` messages of the answer have arrived. */
  until(count: number): Promise<void>
  /** Half-closes the stream; resolves with its end once the server ended it. */
  end(): Promise<RawAnswer>
}

/** A bidirectional call (ModelStreamInfer) over `raw`'s session: frames written as given (a
 * compressed one's flag says so; `compression` is the call's encoding), answers counted, never
 * decoded. The same frame may be written many times: it is sent from the caller's buffer. */
export function rawStream (raw: RawGrpc, method: string, compression: Compression = 'identity'): RawStream {
  const stream = raw.session.request({
    ':method': 'POST',
    ':path': `/inference.GRPCInferenceService/${method}`,
    'content-type': 'application/grpc',
    te: 'trailers',
    ...(compression !== 'identity' && { 'grpc-encoding': compression })
  })
  const written = { messages: 0, bytes: 0 }
  const answer: RawAnswer = { received: 0 }
  const waiters: Array<{ count: number, resolve: () => void }> = []
  let received = 0
  // The answer's messages: each a 5-byte prefix, then as many bytes as it says.
  let pending = Buffer.alloc(0)
  stream.on('data', (chunk: Buffer) => {
    answer.received += chunk.length
    pending = Buffer.concat([pending, chunk])
    while (pending.length >= 5 && pending.length >= 5 + pending.readUInt32BE(1)) {
      pending = pending.subarray(5 + pending.readUInt32BE(1))
      received++
    }
    for (const waiter of waiters.filter(({ count }) => received >= count)) {
      waiters.splice(waiters.indexOf(waiter), 1)
      waiter.resolve()
    }
  })
  recordStatus(stream, answer)
  stream.on('error', (error: Error) => { answer.ended = (error as { code?: string }).code ?? error.message })
  const closed = new Promise<RawAnswer>((resolve) => stream.on('close', () => resolve(answer)))
  return {
    write: (frame) => {
      stream.write(frame, (error) => {
        if (error !== undefined && error !== null) return
        written.messages++
        written.bytes += frame.length
      })
    },
    written,
    get received () { return received },
    until: (count) => received >= count
      ? Promise.resolve()
      : bounded(new Promise<void>((resolve) => waiters.push({ count, resolve })), `${count} answers (${received} so far)`),
    end: () => {
      stream.end()
      return bounded(closed, 'the end of the stream')
    }
  }
}

/** A ModelInferRequest as grpc-js would encode it, for a raw HTTP/2 call. */
export const encodedInfer = (request: object): Buffer =>
  (inferenceService().service.ModelInfer.requestSerialize as (value: object) => Buffer)(request)

/** A ModelInfer of `echoModel('echo', ['UINT8'])` whose answer carries `byteSize` bytes raw, read
 * from a region of that size registered as `in`. */
export async function echoRegion (t: Test, app: FastifyInstance, byteSize: number): Promise<Buffer> {
  const object = makeMappedObject(t, byteSize, 'raw_grpc_echo')
  await registerRegion(t, app, 'in', object.key, byteSize)
  const shm = { string_param: 'in' }
  return encodedInfer({
    model_name: 'echo',
    inputs: [{
      name: 'IN_UINT8',
      datatype: 'UINT8',
      shape: [byteSize],
      parameters: { shared_memory_region: shm, shared_memory_offset: { int64_param: 0 }, shared_memory_byte_size: { int64_param: byteSize } }
    }]
  })
}
