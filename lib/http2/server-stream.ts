/**
 * One request's stream on a connection of the package's own HTTP/2 (server-connection.ts): what
 * its client sends, handed on as it arrives, and what this side answers, framed and held to the
 * peer's flow-control windows. A consumer gives its handlers (`handle`) when it is given the stream.
 *
 * Its receive window is its memory bound: the client may send no more than the window this side
 * grants, and a paused stream grants none until it is resumed.
 */
import { ErrorCode, FrameType } from './protocol'
import type { RequestHeaders } from './request-headers'

/** What a stream asks of its connection (server-connection.ts). */
export interface StreamConnection {
  readonly sendWindow: number
  readonly streamWindowBytes: number
  sendHeaders(streamId: number, fields: readonly string[], endStream: boolean): void
  /** Sends as much of `data` as one frame and the connection's window take; returns how much. */
  sendData(streamId: number, data: Buffer, endStream: boolean): number
  sendWord(type: number, streamId: number, value: number): void
  resetStream(streamId: number, code: number): void
  blocked(stream: Http2ServerStream): void
  closeStream(stream: Http2ServerStream, code: number): void
}

/** What a consumer hears of its stream. */
export type StreamHandlers = Pick<Http2ServerStream, 'onData' | 'onEnd' | 'onClose' | 'onDrain'>

const ignored = () => {}

export class Http2ServerStream {
  readonly id: number
  readonly headers: RequestHeaders
  /** A DATA frame's payload: a view of the connection's bytes (held, it holds them). */
  onData: (chunk: Buffer) => void = ignored
  /** The client sent all it will. */
  onEnd: () => void = ignored
  /** The stream is over: `code` is NO_ERROR when both sides ended it, else why it was reset. */
  onClose: (code: number) => void = ignored
  /** DATA that waited for a window is all out (the windows let it into the connection's writes). */
  onDrain: () => void = ignored
  /** The client's side is over (END_STREAM received). */
  remoteEnded = false
  /** This side sent END_STREAM, or reset the stream. */
  localEnded = false
  /** Flow control: what this side may still send, and what the client may. */
  sendWindow: number
  receiveWindow: number
  readonly #connection: StreamConnection
  /** DATA this side has queued and the windows have not let out yet. */
  readonly #pending: Buffer[] = []
  #pendingBytes = 0
  /** Pending DATA waited for a window: its consumer hears when it is all out. */
  #waiting = false
  /** What ends the stream once the pending DATA is out: trailers, or END_STREAM on empty DATA. */
  #ending: string[] | 'data' | undefined
  #headersSent = false
  #paused = false
  /** Received bytes not yet granted back to the client. */
  #ungranted = 0

  constructor (connection: StreamConnection, id: number, headers: RequestHeaders, sendWindow: number, receiveWindow: number) {
    this.#connection = connection
    this.id = id
    this.headers = headers
    this.sendWindow = sendWindow
    this.receiveWindow = receiveWindow
  }

  /**
   * Sets the consumer's handlers, given in an object literal: V8 allocates a function literal
   * assigned to a property (`stream.onEnd = () => ...`) in the old generation, where one made per
   * stream keeps what it captures alive through young collections (eslint.config.js says more).
   */
  handle (handlers: Partial<StreamHandlers>): void {
    Object.assign(this, handlers)
  }

  /** Sends the response's headers; `endStream` ends the stream with them (a trailers-only answer). */
  respond (fields: readonly string[], endStream = false): void {
    if (this.localEnded) return
    if (this.#headersSent) throw new Error('response headers sent already')
    this.#headersSent = true
    this.#connection.sendHeaders(this.id, fields, endStream)
    if (endStream) this.#endLocally()
  }

  /** Queues `data` as DATA frames, sent as the peer's windows allow. */
  write (data: Buffer): void {
    if (this.localEnded || this.#ending !== undefined) return
    if (!this.#headersSent) throw new Error('response headers not sent')
    if (data.length > 0) {
      this.#pending.push(data)
      this.#pendingBytes += data.length
    }
    this.flush()
  }

  /** Ends the stream once its DATA is out: with `trailers`, or an empty DATA frame. */
  end (trailers?: readonly string[]): void {
    if (this.localEnded || this.#ending !== undefined) return
    if (!this.#headersSent) throw new Error('response headers not sent')
    this.#ending = trailers === undefined ? 'data' : [...trailers]
    this.flush()
  }

  /** Resets the stream (RST_STREAM): what was queued is dropped. */
  reset (code: number = ErrorCode.CANCEL): void {
    if (this.localEnded && this.remoteEnded) return
    this.#pending.length = 0
    this.#pendingBytes = 0
    this.#connection.resetStream(this.id, code)
  }

  /** Both sides are over: ended, or reset. */
  get closed (): boolean {
    return this.localEnded && this.remoteEnded
  }

  /** DATA queued that the windows have not let out yet. */
  get pendingBytes (): number {
    return this.#pendingBytes
  }

  get paused (): boolean {
    return this.#paused
  }

  /** Stops granting the client window: it sends no more than it may already. */
  pause (): void {
    this.#paused = true
  }

  resume (): void {
    this.#paused = false
    this.#grant()
  }

  /** Sends what the windows let out, and the end once all is out. */
  flush (): void {
    while (this.#pending.length > 0) {
      const sendable = Math.min(this.sendWindow, this.#connection.sendWindow)
      if (sendable <= 0) {
        this.#waiting = true
        return this.#connection.blocked(this)
      }
      const data = this.#pending[0]
      const sent = this.#connection.sendData(this.id, data.subarray(0, sendable), false)
      this.sendWindow -= sent
      this.#pendingBytes -= sent
      if (sent === data.length) this.#pending.shift()
      else this.#pending[0] = data.subarray(sent)
    }
    if (this.#waiting) {
      this.#waiting = false
      this.onDrain()
    }
    const ending = this.#ending
    if (ending === undefined) return
    if (ending === 'data') this.#connection.sendData(this.id, EMPTY, true)
    else this.#connection.sendHeaders(this.id, ending, true)
    this.#ending = undefined
    this.#endLocally()
  }

  /** The connection's handling of a DATA frame's `length` bytes (padding included) and payload. */
  received (length: number, payload: Buffer, endStream: boolean): void {
    this.#ungranted += length
    if (payload.length > 0) this.onData(payload)
    if (endStream) this.endedRemotely()
    else this.#grant()
  }

  /** The client's END_STREAM (the connection sees to it that it comes once). */
  endedRemotely (): void {
    this.remoteEnded = true
    this.onEnd()
    if (this.localEnded) this.#connection.closeStream(this, ErrorCode.NO_ERROR)
  }

  #endLocally (): void {
    this.localEnded = true
    if (this.remoteEnded) this.#connection.closeStream(this, ErrorCode.NO_ERROR)
  }

  /** Gives the client back the window it used, once half of it is used and the stream reads on. */
  #grant (): void {
    if (this.#paused || this.remoteEnded || this.#ungranted < this.#connection.streamWindowBytes / 2) return
    this.#connection.sendWord(FrameType.WINDOW_UPDATE, this.id, this.#ungranted)
    this.receiveWindow += this.#ungranted
    this.#ungranted = 0
  }
}

const EMPTY = Buffer.alloc(0)
