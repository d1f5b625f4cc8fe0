/**
 * A call's connection, for the peer rule: grpc-js tells a server interceptor the four ends of the
 * connection a call came on, and tells a handler none of them. The interceptor puts them on the
 * call's metadata object under a symbol (no client can send one), where `connectionOf` reads them.
 */
import type { Metadata, ServerInterceptingCall, ServerInterceptor } from '@grpc/grpc-js'
import type { ConnectionInfo } from '@grpc/grpc-js/build/src/server-interceptors'
import { grpcJs } from './peers'

const CONNECTION = Symbol('fastify-triton-shm: the connection a call came on')

type Marked = Metadata & { [CONNECTION]?: ConnectionInfo }

/** The RPCs that ask who their client is: the shared memory ones. */
const needsConnection = (path: string) => path.includes('SharedMemory')

/** A server interceptor (`new grpc.Server({ interceptors: [connectionInterceptor()] })`) that lets
 * the shared memory RPCs ask the kernel who their client is. The plugin's listener has it. Other
 * calls (inference) pass through it untouched: a layer less for each of them. */
export function connectionInterceptor (): ServerInterceptor {
  const { ServerInterceptingCall } = grpcJs()
  return (method, call) => {
    if (!needsConnection(method.path)) return call as ServerInterceptingCall
    return new ServerInterceptingCall(call, {
      start: (next) => next({
        onReceiveMetadata: (metadata: Marked, passOn) => {
          metadata[CONNECTION] = call.getConnectionInfo()
          passOn(metadata)
        }
      })
    })
  }
}

/** The four ends of the call's connection, when the server has `connectionInterceptor`. */
export const connectionOf = (call: { metadata: Metadata }): Partial<ConnectionInfo> | undefined => (call.metadata as Marked)[CONNECTION]
