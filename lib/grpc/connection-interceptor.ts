/**
 * A call's connection, for the peer rule: grpc-js tells a server interceptor the four ends of the
 * connection a call came on, and tells a handler none of them. The interceptor puts the connection
 * on the call's metadata object under a symbol (no client can send one), where `connectionOf`
 * reads it: the accepted socket itself where the server knows it by those ends (the plugin's
 * listener, which accepts its connections: over a Unix socket the kernel names the client by
 * SO_PEERCRED), else the ends.
 */
import type { Socket } from 'node:net'
import type { Metadata, ServerInterceptingCall, ServerInterceptor } from '@grpc/grpc-js'
import type { ConnectionInfo } from '@grpc/grpc-js/build/src/server-interceptors'
import type { CallerConnection } from '../registry/peer-policy'
import { grpcJs } from './peers'

const CONNECTION = Symbol('fastify-triton-shm: the connection a call came on')

type Marked = Metadata & { [CONNECTION]?: CallerConnection }

/** The accepted socket of a call's connection, by its ends or its metadata; undefined if the server does not know it. */
export type SocketOf = (connection: ConnectionInfo, metadata: Metadata) => Socket | undefined

/** The RPCs that ask who their client is: the shared memory ones. */
const needsConnection = (path: string) => path.includes('SharedMemory')

/** A server interceptor (`new grpc.Server({ interceptors: [connectionInterceptor()] })`) that lets
 * the shared memory RPCs ask the kernel who their client is. The plugin's listener has it, with
 * `socketOf`. Other calls (inference) pass through it untouched: a layer less for each of them. */
export function connectionInterceptor (socketOf?: SocketOf): ServerInterceptor {
  const { ServerInterceptingCall } = grpcJs()
  return (method, call) => {
    if (!needsConnection(method.path)) return call as ServerInterceptingCall
    return new ServerInterceptingCall(call, {
      start: (next) => next({
        onReceiveMetadata: (metadata: Marked, passOn) => {
          const addresses = call.getConnectionInfo()
          const socket = socketOf?.(addresses, metadata)
          metadata[CONNECTION] = socket === undefined ? { addresses } : { socket }
          passOn(metadata)
        }
      })
    })
  }
}

/** The call's connection, when the server has `connectionInterceptor`. */
export const connectionOf = (call: { metadata: Metadata }): CallerConnection => (call.metadata as Marked)[CONNECTION]
