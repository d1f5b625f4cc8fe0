/**
 * Calls between the processes of one service, straight from one to another (never through a
 * primary): each process that serves a model table listens on a Unix domain socket of its own, in
 * a directory beside the shared store that only the service's user may enter (mode 0700), so no
 * other user can connect, whatever the sockets' own modes.
 *
 * A call carries a message (a JSON head and binary parts, passed on as they are: a tensor is
 * never copied into JSON) and gets replies: any number of them, each acknowledged by the caller
 * once it took it (so the callee never runs ahead of a slow client of the caller), then a last
 * one, or a failure. The caller may cancel it. A connection that ends fails every call on it, at
 * once: a process that dies never leaves a call of another waiting.
 *
 * A frame: u32 length of what follows, u8 kind, u32 call id, u32 head length, head (JSON), u32
 * number of parts, u32 length of each part, the parts.
 */
import { mkdirSync } from 'node:fs'
import net from 'node:net'
import path from 'node:path'
import { channelPathTooLong } from '../errors'
import { fitsSocketAddress, MAX_SOCKET_PATH_BYTES } from '../util/socket-path'

/** What a call or a reply carries. */
export interface ChannelMessage {
  /** JSON-able. */
  head: unknown
  parts: Uint8Array[]
}

/** A failure a callee answers with: the error's code, kind and message, as the caller rebuilds it. */
export interface ChannelFailure {
  code: string
  kind: string
  message: string
}

/** The process called is not there any more (it died, or stopped serving), or never was. */
export class PeerGoneError extends Error {
  readonly code = 'ERR_SHM_PEER_GONE'
  /** To a callee, its call was cancelled: what the caller asked for is no longer wanted. */
  readonly kind = 'cancelled'
  constructor (reason: string) {
    super(`the process called is gone: ${reason}`)
    this.name = 'PeerGoneError'
  }
}

/** A call another process made of this one. */
export interface IncomingCall extends ChannelMessage {
  /** Aborted when the caller cancels the call, or its connection ends. */
  readonly signal: AbortSignal
  /** Sends a reply that is not the last; resolves once the caller has taken it, rejects once the
   * call is over (cancelled, or its caller gone). */
  reply(message: ChannelMessage): Promise<void>
  /** Sends the last reply. */
  end(message?: ChannelMessage): void
  fail(failure: ChannelFailure): void
}

export type CallHandler = (call: IncomingCall) => void

export interface CallOptions {
  /** Each reply that is not the last: acknowledged once what it returns has settled. */
  onReply?(message: ChannelMessage): unknown
  /** Cancels the call: the callee's `signal` aborts, and the call rejects with the signal's reason. */
  signal?: AbortSignal
}

const enum Kind { Call = 1, Reply = 2, End = 3, Failure = 4, Ack = 5, Cancel = 6 }

const FRAME_HEAD_BYTES = 4 + 1 + 4 + 4
const NO_PARTS: Uint8Array[] = []

/** Writes one frame, its parts as they are (no copy into the frame). */
function writeFrame (socket: net.Socket, kind: Kind, id: number, { head, parts }: ChannelMessage = { head: null, parts: NO_PARTS }): void {
  const json = Buffer.from(JSON.stringify(head ?? null))
  const lengths = Buffer.allocUnsafe(4 + 4 * parts.length)
  lengths.writeUInt32BE(parts.length, 0)
  parts.forEach((part, index) => lengths.writeUInt32BE(part.byteLength, 4 + 4 * index))
  const body = parts.reduce((total, part) => total + part.byteLength, 0)
  const start = Buffer.allocUnsafe(FRAME_HEAD_BYTES)
  start.writeUInt32BE(FRAME_HEAD_BYTES - 4 + json.length + lengths.length + body, 0)
  start.writeUInt8(kind, 4)
  start.writeUInt32BE(id, 5)
  start.writeUInt32BE(json.length, 9)
  socket.cork()
  socket.write(start)
  socket.write(json)
  socket.write(lengths)
  for (const part of parts) if (part.byteLength > 0) socket.write(part)
  socket.uncork()
}

interface Frame extends ChannelMessage {
  kind: Kind
  id: number
}

/** Splits what a connection reads into frames; throws on bytes that are not of this protocol. */
class FrameReader {
  readonly #chunks: Buffer[] = []
  #buffered = 0

  push (chunk: Buffer): Frame[] {
    this.#chunks.push(chunk)
    this.#buffered += chunk.length
    const frames: Frame[] = []
    for (;;) {
      const length = this.#frameLength()
      if (length === undefined || this.#buffered < 4 + length) return frames
      frames.push(parseFrame(this.#take(4 + length)))
    }
  }

  #frameLength (): number | undefined {
    if (this.#buffered < 4) return undefined
    // The length may arrive split over chunks: they are joined then (a few bytes, rarely).
    if (this.#chunks[0].length < 4) this.#chunks.splice(0, Infinity, Buffer.concat(this.#chunks))
    const length = this.#chunks[0].readUInt32BE(0)
    if (length < FRAME_HEAD_BYTES - 4) throw new Error(`a frame of ${length} bytes`)
    return length
  }

  /** The next `bytes` bytes, in one buffer (copied only when they span chunks). */
  #take (bytes: number): Buffer {
    const first = this.#chunks[0]
    let taken: Buffer
    if (first.length >= bytes) {
      taken = first.subarray(0, bytes)
      if (first.length === bytes) this.#chunks.shift()
      else this.#chunks[0] = first.subarray(bytes)
    } else {
      const whole = Buffer.concat(this.#chunks.splice(0))
      taken = whole.subarray(0, bytes)
      if (whole.length > bytes) this.#chunks.push(whole.subarray(bytes))
    }
    this.#buffered -= bytes
    return taken
  }
}

function parseFrame (frame: Buffer): Frame {
  const kind = frame.readUInt8(4) as Kind
  const id = frame.readUInt32BE(5)
  const jsonEnd = FRAME_HEAD_BYTES + frame.readUInt32BE(9)
  const head = JSON.parse(frame.toString('utf8', FRAME_HEAD_BYTES, jsonEnd)) as unknown
  const count = frame.readUInt32BE(jsonEnd)
  const parts: Uint8Array[] = []
  let offset = jsonEnd + 4 + 4 * count
  for (let index = 0; index < count; index++) {
    const length = frame.readUInt32BE(jsonEnd + 4 + 4 * index)
    if (offset + length > frame.length) throw new Error('a part runs past its frame')
    parts.push(frame.subarray(offset, offset += length))
  }
  return { kind, id, head, parts }
}

/** Reads frames off `socket` into `onFrame`; a connection that sends what is not a frame is dropped. */
function readFrames (socket: net.Socket, onFrame: (frame: Frame) => void): void {
  const reader = new FrameReader()
  socket.on('data', (chunk: Buffer) => {
    let frames: Frame[]
    try {
      frames = reader.push(chunk)
    } catch {
      return socket.destroy()
    }
    for (const frame of frames) onFrame(frame)
  })
}

interface PendingCall {
  options: CallOptions
  resolve(message: ChannelMessage): void
  reject(error: unknown): void
}

/** This process's connection to another one: its calls, by id. */
class Connection {
  readonly #socket: net.Socket
  readonly #calls = new Map<number, PendingCall>()
  #nextId = 1
  #gone: PeerGoneError | undefined

  constructor (socketPath: string, onClose: () => void) {
    this.#socket = net.connect(socketPath)
    readFrames(this.#socket, (frame) => this.#onFrame(frame))
    this.#socket.on('error', (error: NodeJS.ErrnoException) => { this.#gone = new PeerGoneError(String(error.code)) })
    this.#socket.on('close', () => {
      const gone = this.#gone ?? new PeerGoneError('its connection closed')
      for (const call of this.#calls.values()) call.reject(gone)
      this.#calls.clear()
      onClose()
    })
  }

  /** A call on a connection that failed fails when it closes, which comes next. */
  call (message: ChannelMessage, options: CallOptions): Promise<ChannelMessage> {
    const { signal } = options
    if (signal?.aborted === true) return Promise.reject(signal.reason)
    const id = this.#nextId
    this.#nextId = (this.#nextId + 1) >>> 0
    return new Promise<ChannelMessage>((resolve, reject) => {
      const cancel = () => {
        this.#calls.delete(id)
        writeFrame(this.#socket, Kind.Cancel, id)
        reject(signal?.reason)
      }
      signal?.addEventListener('abort', cancel, { once: true })
      const settled = () => signal?.removeEventListener('abort', cancel)
      this.#calls.set(id, {
        options,
        resolve: (reply) => { settled(); resolve(reply) },
        reject: (error) => { settled(); reject(error) }
      })
      writeFrame(this.#socket, Kind.Call, id, message)
    })
  }

  #onFrame ({ kind, id, head, parts }: Frame): void {
    const call = this.#calls.get(id)
    if (call === undefined) return
    if (kind === Kind.Reply) {
      // Taken once the caller's handler is done with it: the callee waits for that.
      new Promise((resolve) => { resolve(call.options.onReply?.({ head, parts })) }).then(() => {
        if (this.#calls.has(id)) writeFrame(this.#socket, Kind.Ack, id)
      }, (error: unknown) => {
        if (!this.#calls.delete(id)) return
        writeFrame(this.#socket, Kind.Cancel, id)
        call.reject(error)
      })
      return
    }
    this.#calls.delete(id)
    if (kind === Kind.End) call.resolve({ head, parts })
    else call.reject(head as ChannelFailure)
  }

  close (): void {
    this.#socket.destroy()
  }
}

/** A call another process made of this one, as its connection keeps it. */
class Incoming implements IncomingCall {
  readonly #aborts = new AbortController()
  #acked: Array<{ resolve(): void, reject(error: unknown): void }> = []
  #over = false

  constructor (private readonly socket: net.Socket, private readonly id: number, readonly head: unknown,
    readonly parts: Uint8Array[], private readonly forget: () => void) {}

  get signal (): AbortSignal {
    return this.#aborts.signal
  }

  reply (message: ChannelMessage): Promise<void> {
    if (this.#over) return Promise.reject(this.#aborts.signal.reason ?? new PeerGoneError('its call is over'))
    return new Promise((resolve, reject) => {
      this.#acked.push({ resolve, reject })
      writeFrame(this.socket, Kind.Reply, this.id, message)
    })
  }

  end (message?: ChannelMessage): void {
    this.#finish(Kind.End, message)
  }

  fail (failure: ChannelFailure): void {
    this.#finish(Kind.Failure, { head: failure, parts: NO_PARTS })
  }

  #finish (kind: Kind, message?: ChannelMessage): void {
    if (this.#over) return
    this.#over = true
    this.forget()
    writeFrame(this.socket, kind, this.id, message)
  }

  acknowledged (): void {
    this.#acked.shift()?.resolve()
  }

  /** The caller cancelled the call, or went away (a call over is no longer its connection's). */
  abort (reason: string): void {
    this.#over = true
    this.forget()
    const error = new PeerGoneError(reason)
    this.#aborts.abort(error)
    for (const { reject } of this.#acked.splice(0)) reject(error)
  }
}

/** The calls of one connection another process opened to this one. */
function serveConnection (socket: net.Socket, handler: CallHandler): void {
  const calls = new Map<number, Incoming>()
  socket.on('error', () => {})
  socket.on('close', () => {
    for (const call of [...calls.values()]) call.abort('its caller went away')
  })
  readFrames(socket, ({ kind, id, head, parts }) => {
    if (kind === Kind.Call) {
      const call = new Incoming(socket, id, head, parts, () => calls.delete(id))
      calls.set(id, call)
      return handler(call)
    }
    if (kind === Kind.Ack) calls.get(id)?.acknowledged()
    else if (kind === Kind.Cancel) calls.get(id)?.abort('its caller cancelled it')
  })
}

/** This process's calls of the others: a connection to each process it called, kept open. */
export class ChannelCaller {
  readonly #connections = new Map<string, Connection>()

  /** Calls the process listening at `socketPath`: resolves with its last reply, rejects with its
   * failure (a `ChannelFailure`), a `PeerGoneError`, or the cancelling signal's reason. */
  call (socketPath: string, message: ChannelMessage, options: CallOptions = {}): Promise<ChannelMessage> {
    let connection = this.#connections.get(socketPath)
    if (connection === undefined) {
      const opened = new Connection(socketPath, () => {
        if (this.#connections.get(socketPath) === opened) this.#connections.delete(socketPath)
      })
      this.#connections.set(socketPath, connection = opened)
    }
    return connection.call(message, options)
  }

  /** Ends every connection: the calls on them fail. */
  close (): void {
    for (const connection of this.#connections.values()) connection.close()
  }
}

/** Where the other processes call this one: a Unix domain socket, and the connections it accepted. */
export class ChannelListener {
  readonly path: string
  readonly #server: net.Server
  readonly #sockets = new Set<net.Socket>()

  /** Listens at `socketPath` (its directory is made, mode 0700, if it is not there); throws
   * `ERR_SHM_CHANNEL_PATH_TOO_LONG` for a path no socket can have. */
  constructor (socketPath: string, handler: CallHandler) {
    if (!fitsSocketAddress(socketPath)) throw channelPathTooLong(undefined, socketPath, MAX_SOCKET_PATH_BYTES)
    mkdirSync(path.dirname(socketPath), { recursive: true, mode: 0o700 })
    this.path = socketPath
    this.#server = net.createServer((socket) => {
      this.#sockets.add(socket)
      socket.once('close', () => this.#sockets.delete(socket))
      serveConnection(socket, handler)
    })
    // The socket file is made now; the first calls wait in the kernel's queue until it accepts.
    this.#server.listen(socketPath)
    this.#server.unref()
  }

  /** Stops listening (the socket file is removed), and ends the connections it accepted: their
   * calls are aborted. */
  close (): void {
    this.#server.close()
    for (const socket of this.#sockets) socket.destroy()
  }
}
