/**
 * The plugin's listener follows each call grpc-js serves to its end: what a call holds (its share
 * of the bytes in flight, its trace) is given back once it is over, however it ends. grpc-js tells
 * a server interceptor when a call ends; the interceptor tells the handler through the call's
 * metadata, under a symbol no client can send. (A call's answer is watched by the listener's send
 * timeout, on its stream: send-timeout.ts.)
 */
import type { Metadata, ServerInterceptor } from '@grpc/grpc-js'
import { grpcJs } from './peers'

const CALL_END = Symbol('fastify-triton-shm: what runs when this call is over')

type Marked = Metadata & { [CALL_END]?: (ended: () => void) => void }

/** The listener's interceptor: see above. */
export function callTracker (): ServerInterceptor {
  const { ServerInterceptingCall } = grpcJs()
  return (_method, call) => {
    let markEnded!: () => void
    // What waits for the call's end runs once it is over, even if it asks after that.
    const ended = new Promise<void>((resolve) => { markEnded = resolve })
    return new ServerInterceptingCall(call, {
      start: (next) => next({
        onReceiveMetadata: (metadata: Marked, passOn) => {
          const afterEnd = (callback: () => void) => { ended.then(callback) }
          metadata[CALL_END] = afterEnd
          passOn(metadata)
        },
        // grpc-js tells a call's listener it is cancelled whenever its stream closes: once its
        // status is sent, or when the client or the connection went away.
        onCancel: markEnded
      })
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
