/**
 * The listener's receive timeout: a call that began sending its request must finish in time, as
 * an HTTP server answers 408 to a request not received whole. What a partly sent request holds
 * (a ModelInfer message is charged by the length its prefix declares; grpc-js buffers the bytes of
 * a message it has not decoded yet) is otherwise held until its client goes. A unary call must
 * send its message and end its request (half-close) within the timeout of its start; a stream
 * each message within the timeout of its first byte, and may wait as long as it likes between
 * messages, holding nothing. A call late is cancelled (RST_STREAM CANCEL): whoever serves it, the
 * listener itself or grpc-js, sees its stream close and lets go of what it held.
 *
 * A stream's bytes are seen as they are handed to its consumer (the listener's own ModelInfer, or
 * grpc-js), a unary call's end as its consumer hears of it (each reads its whole request before
 * the call runs). While the stream is paused (its consumer takes no more messages, and the client
 * is granted no more window), the client cannot be late: the timeout begins again. Deadlines are
 * checked every tenth of the timeout (`checkEvery`), so a call late is
 * cancelled within [timeout, 1.1 × timeout] of what it was timed from.
 */
import { performance } from 'node:perf_hooks'
import { ErrorCode } from '../http2/protocol'
import type { Http2ServerStream } from '../http2/server-stream'
import { checkEvery, checkPeriodFor } from '../util/periodic-checks'
import { MESSAGE_PREFIX_BYTES } from './protocol'

/** Where a stream's received bytes are in gRPC's framing. */
class Framing {
  #prefixLeft = MESSAGE_PREFIX_BYTES
  #length = 0
  #bodyLeft = 0

  /** True while a message has begun and not ended. */
  get inMessage (): boolean {
    return this.#prefixLeft < MESSAGE_PREFIX_BYTES || this.#bodyLeft > 0
  }

  /** Follows `chunk`; returns whether a message began in it (then `inMessage` says if it ended). */
  read (chunk: Uint8Array): boolean {
    let began = false
    let at = 0
    while (at < chunk.length) {
      if (this.#bodyLeft > 0) {
        const taken = Math.min(this.#bodyLeft, chunk.length - at)
        this.#bodyLeft -= taken
        at += taken
        continue
      }
      began ||= this.#prefixLeft === MESSAGE_PREFIX_BYTES
      // The flag byte is skipped; the four after it are the length.
      if (this.#prefixLeft < MESSAGE_PREFIX_BYTES) this.#length = this.#length * 256 + chunk[at]
      at++
      if (--this.#prefixLeft === 0) {
        this.#bodyLeft = this.#length
        this.#prefixLeft = MESSAGE_PREFIX_BYTES
        this.#length = 0
      }
    }
    return began
  }
}

export interface ReceiveTimeoutOptions {
  ms: number
  /** Told of a call cancelled for it, before its stream closes. */
  late: (stream: Http2ServerStream) => void
}

/** Watches `stream` from its start (`streaming`: a client-streaming call's, whose messages are
 * timed each, where a unary call's request is timed whole). Call it once the stream's consumer has
 * set its handlers: it sees what they are handed, before them. */
export function watchReceiving (stream: Http2ServerStream, streaming: boolean, { ms, late }: ReceiveTimeoutOptions): void {
  // When what is timed began (the call, or the message under way); undefined while nothing is.
  let since = streaming ? undefined : performance.now()
  const stop = checkEvery(checkPeriodFor(ms), () => {
    if (since === undefined || performance.now() - since < ms) return
    if (stream.paused) {
      since = performance.now()
      return
    }
    stop()
    late(stream)
    stream.reset(ErrorCode.CANCEL)
  })
  const { onData, onEnd, onClose } = stream
  stream.handle({
    onClose: (code) => {
      stop()
      onClose(code)
    }
  })
  if (!streaming) {
    stream.handle({
      onEnd: () => {
        stop()
        onEnd()
      }
    })
    return
  }
  const framing = new Framing()
  stream.handle({
    onData: (chunk) => {
      // A message that began here restarts the time: the one before it ended here.
      if (framing.read(chunk)) since = undefined
      if (framing.inMessage) since ??= performance.now()
      else since = undefined
      onData(chunk)
    }
  })
}
