/**
 * The listener's send timeout: a call whose answer waits on a client that takes none of it for
 * the send timeout has its connection dropped, as the HTTP face drops a client that stopped
 * reading. An answer waits while its stream has DATA the client's windows hold back, or while its
 * connection's socket holds bytes the kernel has not taken; only then does the clock run. A call
 * that has sent all it has (a stream waiting on its model, or on its client's next request) waits
 * on no one, however long it stays open. Every call is watched alike, whoever serves it (the
 * listener's own ModelInfer, or grpc-js), from its start to its stream's close.
 */
import type { Socket } from 'node:net'
import type { Http2ServerStream } from '../http2/server-stream'
import { watchOutput } from '../util/send-progress'

export interface SendTimeoutOptions {
  ms: number
  /** Told of a connection dropped for it, before it is. */
  stalled: (socket: Socket) => void
}

/** Watches `stream`, on `socket`, until it closes. Call it once the stream's consumer has set its
 * handlers. */
export function watchSending (stream: Http2ServerStream, socket: Socket, { ms, stalled }: SendTimeoutOptions): void {
  const waiting = () => stream.pendingBytes > 0 || socket.writableLength > 0
  const stop = watchOutput(socket, ms, () => {
    stalled(socket)
    socket.destroy()
  }, waiting)
  const { onClose } = stream
  stream.handle({
    onClose: (code) => {
      stop()
      onClose(code)
    }
  })
}
