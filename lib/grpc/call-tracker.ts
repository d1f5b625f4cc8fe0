/**
 * The plugin's listener follows each call to its end: what a call holds (its share of the bytes in
 * flight) is given back once it is over, however it ends, and a call whose answer waits on a
 * connection that has taken none of its output for the send timeout has that connection dropped,
 * as the HTTP face drops a client that stopped reading. grpc-js tells a server interceptor when a
 * call ends and when its answer is sent; the interceptor tells the handler through the call's
 * metadata, under a symbol no client can send.
 */
import type { Socket } from 'node:net'
import type { Metadata, ServerInterceptor } from '@grpc/grpc-js'
import { watchOutput } from '../util/send-progress'
import type { SocketOf } from './connection-interceptor'
import { grpcJs } from './peers'

const CALL_END = Symbol('fastify-triton-shm: what runs when this call is over')

type Marked = Metadata & { [CALL_END]?: (ended: () => void) => void }

export interface CallTrackerOptions {
  /** The connection a call came on, by its ends or its metadata (undefined when it is gone already). */
  socketOf: SocketOf
  sendTimeoutMs: number
  /** Told of each connection dropped. */
  dropped: (socket: Socket) => void
}

/** The listener's interceptor: see above. */
export function callTracker ({ socketOf, sendTimeoutMs, dropped }: CallTrackerOptions): ServerInterceptor {
  const { ServerInterceptingCall } = grpcJs()
  return (_method, call) => {
    let over = false
    // The call's connection, found once its metadata is in (before any message it sends).
    let socket: Socket | undefined
    let stopWatching = () => {}
    let markEnded!: () => void
    // What waits for the call's end runs once it is over, even if it asks after that.
    const ended = new Promise<void>((resolve) => { markEnded = resolve })
    const end = () => {
      over = true
      stopWatching()
      markEnded()
    }
    return new ServerInterceptingCall(call, {
      start: (next) => next({
        onReceiveMetadata: (metadata: Marked, passOn) => {
          metadata[CALL_END] = (callback) => { ended.then(callback) }
          socket = socketOf(call.getConnectionInfo(), metadata)
          passOn(metadata)
        },
        // grpc-js tells a call's listener it is cancelled whenever its stream closes: once its
        // status is sent, or when the client or the connection went away.
        onCancel: end
      }),
      sendMessage: (message, next) => {
        const watched = socket
        if (watched !== undefined && !over) {
          stopWatching()
          stopWatching = watchOutput(watched, sendTimeoutMs, () => {
            dropped(watched)
            watched.destroy()
          })
        }
        next(message)
      }
    })
  }
}

/** Runs `ended` once the call is over; false (and nothing runs) when the server has no
 * `callTracker`, as a host's own server may not. */
export function onCallEnd (call: { metadata: Metadata }, ended: () => void): boolean {
  const register = (call.metadata as Marked)[CALL_END]
  register?.(ended)
  return register !== undefined
}
