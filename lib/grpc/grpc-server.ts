/**
 * The plugin's gRPC listener (`grpc` option): a grpc-js server on its own port (grpc-js cannot
 * share Fastify's) serving `GRPCInferenceService` over the plugin's shared memory API and model
 * table. It listens once the app is ready and stops when the app closes: after its calls in
 * flight, or, for calls still open the send timeout later (a client that stopped reading, or never
 * finished sending), by cutting their connections.
 *
 * It listens on TCP, on a Unix domain socket (`path`), or both, and speaks HTTP/2 itself (the
 * package's own, lib/http2): a plain unary ModelInfer is served on its stream
 * (model-infer-streams.ts), every other call handed to grpc-js on its stream (grpc-js-stream.ts),
 * or relayed to it (grpc-js-relay.ts). It knows each call's socket: the shared memory RPCs ask the
 * kernel who is at its other end (the peer rule), and a call whose answer waits on a connection
 * that took none of it for the send timeout has that connection dropped, as over HTTP
 * (`watchSending`). Messages it receives are bounded before they are decoded: by a
 * size sized from the registry's `inFlight` budget (compressed ones included: they stop inflating
 * at that size), then by what their decoded form will take, charged to that budget as they arrive,
 * with the message; a paused stream reads no more (`receivedMessages`); a call that does not send
 * its request in the receive timeout is cancelled (`watchReceiving`).
 */
import { once } from 'node:events'
import net from 'node:net'
import type { Metadata, Server } from '@grpc/grpc-js'
import type { ConnectionInfo } from '@grpc/grpc-js/build/src/server-interceptors'
import { DEFAULT_INFER_LIMITS } from '../kserve/infer-limits'
import { ModelTable } from '../models/model-table'
import type { SharedMemoryApi } from '../registry/shared-memory-api'
import { RestrictedFeatures } from '../util/restricted-features'
import { Http2ServerConnection } from '../http2/server-connection'
import type { Http2ServerStream } from '../http2/server-stream'
import { callTracker } from './call-tracker'
import { connectionInterceptor } from './connection-interceptor'
import { type GrpcJsConnection, RELAYED_CONNECTION_HEADER, relayedConnections } from './grpc-js-relay'
import { grpcJsStreams } from './grpc-js-stream'
import { inferenceServiceOver } from './inference-service'
import { modelInferStreams } from './model-infer-streams'
import { DEFAULT_RECEIVE_TIMEOUT_MS, type GrpcListenerOptions, servesTcp } from './listener-options'
import { OpenStreams } from './model-stream-infer'
import { grpcJs } from './peers'
import { MAX_MESSAGE_BYTES, messageLimitOptions, rawRequestsService } from './protocol'
import { receivedMessages } from './received-messages'
import { watchReceiving } from './receive-timeout'
import { watchSending } from './send-timeout'
import { requestDecoders } from './request-decoders'
import { listenOnSocket, setSocketFile } from './socket-listener'
import type { ErrorLogger } from './status'

/** Triton's gRPC port. */
export const DEFAULT_GRPC_PORT = 8001

/**
 * The largest message the listener receives by default: a quarter of what all requests in flight
 * may hold (`maxInFlightBytes`), so that one request of that size fits with its answer (the
 * message, its outputs, and the answer's two copies of them), and at most Triton's 2^31-1.
 */
export const defaultMaxMessageBytes = (maxInFlightBytes: number): number => Math.min(MAX_MESSAGE_BYTES, Math.floor(maxInFlightBytes / 4))

export interface GrpcListener {
  /** The port bound (the one asked for, or the system's choice for port 0); undefined when it
   * listens on a Unix socket alone. */
  readonly port: number | undefined
  /** The Unix socket it listens on, if any. */
  readonly path: string | undefined
  /** The largest message it receives. */
  readonly maxMessageBytes: number
  /** Its ModelStreamInfer streams. */
  readonly streams: OpenStreams
  /** Stops accepting calls, and resolves once the calls in flight have ended: open streams answer
   * the requests they read and end; whatever is still open after the send timeout is cut. */
  close(): Promise<void>
}

export interface GrpcListenerContext {
  api: SharedMemoryApi
  /** The restricted categories: the options' `restrictedProtocols`, with the plugin's `restrictedApi`. */
  restrictions?: RestrictedFeatures
  /** Failed calls are logged at error, connections dropped for a stalled answer at warn. */
  log: ErrorLogger & { warn(object: object, message: string): void }
}

/** A connection's name: its four ends (on a Unix socket, the ones socket-listener.ts gives it). */
const endsOf = ({ remoteAddress, remotePort, localAddress, localPort }: Partial<ConnectionInfo>) =>
  `${remoteAddress} ${remotePort} ${localAddress} ${localPort}`

/** A connection's client, as the listener's warnings name it (`unix:<path>` and a number on a Unix socket). */
const clientOf = ({ remoteAddress, remotePort }: net.Socket) => `${remoteAddress}:${remotePort}`

/** Listens on TCP: `port` on `host`. */
async function listenOnTcp (port: number, host: string, accept: (socket: net.Socket) => void): Promise<net.Server> {
  const listener = net.createServer(accept)
  listener.listen(port, host)
  await once(listener, 'listening')
  return listener
}

const closeAll = (listeners: net.Server[]) => Promise.all(listeners.map((listener) => once(listener.close(), 'close')))

/** Starts the listener; rejects (e.g. the port or the path is taken) with the error of its bind,
 * having closed whatever it bound. */
export async function listenGrpc (options: GrpcListenerOptions, { api, restrictions, log }: GrpcListenerContext): Promise<GrpcListener> {
  const grpc = grpcJs()
  const {
    host = '127.0.0.1', port = DEFAULT_GRPC_PORT, path, socketMode, socketOwner, models = new ModelTable([]), server: metadata, limits, logging,
    receiveTimeoutMs = DEFAULT_RECEIVE_TIMEOUT_MS
  } = options
  const { sendTimeoutMs } = { ...DEFAULT_INFER_LIMITS, ...limits }
  const maxMessageBytes = options.maxMessageBytes ?? defaultMaxMessageBytes(api.registry.inFlight.maxBytes)
  const sockets = new Map<string, net.Socket>()
  const streams = new OpenStreams()
  const restricted = restrictions ?? new RestrictedFeatures([], 'grpc', 'listenGrpc')
  const handlers = inferenceServiceOver(api, { models, limits, log, streams, logging, server: metadata ?? { name: 'fastify-triton-shm', version: '' } }, restricted)
  // A call grpc-js serves has its connection's ends, or, relayed, its connection's name (the
  // header read only then: the relay sets it, where a client's own is no one's).
  const socketOf = (connection: Partial<ConnectionInfo>, metadata: Metadata) =>
    sockets.get(relaying ? String(metadata.get(RELAYED_CONNECTION_HEADER)[0]) : endsOf(connection))
  const sending = {
    ms: sendTimeoutMs,
    stalled: (socket: net.Socket) => log.warn({ sendTimeoutMs, client: clientOf(socket) },
      'a gRPC client took none of its answer for the send timeout: connection dropped')
  }
  const decoders = requestDecoders()
  // Messages are charged before they are decoded, and a paused stream reads no more: first, as it
  // takes over grpc-js's inflation. The connection interceptor tells the shared memory RPCs their
  // calls' sockets: the peer rule's input.
  const received = receivedMessages({ inFlight: api.registry.inFlight, maxMessageBytes, decoderOf: (path) => decoders.get(path)!, log })
  // Without channelz: its per-call accounting costs every call, and nothing here reads it.
  const server: Server = new grpc.Server({
    ...messageLimitOptions(maxMessageBytes), 'grpc.enable_channelz': 0, interceptors: [received, connectionInterceptor(socketOf), callTracker()]
  })
  const service = rawRequestsService().service
  server.addService(service, handlers)
  // grpc-js serves the other calls on the listener's streams, or, where this grpc-js cannot, relayed.
  const handToGrpcJs = grpcJsStreams(server)
  const relaying = handToGrpcJs === undefined
  const grpcJsConnection: (socket: net.Socket, name: string) => GrpcJsConnection = handToGrpcJs === undefined
    ? relayedConnections(server.createConnectionInjector(grpc.ServerCredentials.createInsecure()))
    : (socket) => ({ serve: (stream) => handToGrpcJs(stream, socket), close: () => {} })
  const takeModelInfer = modelInferStreams({ registry: api.registry, models, limits, log, maxMessageBytes, restrictions: restricted })
  // Every call, whoever serves it, sends its request within the receive timeout, and has its
  // answer taken within the send timeout.
  const streaming = new Set(Object.values(service).filter((method) => method.requestStream).map((method) => method.path))
  const connections = new Map<net.Socket, Http2ServerConnection>()
  const accept = (socket: net.Socket) => {
    const ends = endsOf(socket)
    sockets.set(ends, socket)
    const grpcJs = grpcJsConnection(socket, ends)
    const receiving = {
      ms: receiveTimeoutMs,
      late: () => log.warn({ receiveTimeoutMs, client: clientOf(socket) }, 'a gRPC client did not send its request in the receive timeout: call cancelled')
    }
    const serve = (stream: Http2ServerStream) => {
      if (!takeModelInfer(stream)) grpcJs.serve(stream)
      // (A stream its consumer reset at once has nothing left to watch.)
      if (!stream.closed) {
        watchReceiving(stream, streaming.has(stream.headers[':path']), receiving)
        watchSending(stream, socket, sending)
      }
    }
    connections.set(socket, new Http2ServerConnection(socket, serve))
    socket.once('close', () => {
      sockets.delete(ends)
      connections.delete(socket)
      grpcJs.close()
    })
  }
  const listeners: net.Server[] = []
  try {
    if (servesTcp(options)) listeners.push(await listenOnTcp(port, host, accept))
    if (path !== undefined) {
      listeners.push(await listenOnSocket(path, accept))
      setSocketFile({ path, mode: socketMode, owner: socketOwner })
    }
  } catch (error) {
    await closeAll(listeners)
    server.forceShutdown()
    throw error
  }
  const tcp = servesTcp(options) ? listeners[0].address() as net.AddressInfo : undefined
  return {
    port: tcp?.port,
    path,
    maxMessageBytes,
    streams,
    close: async () => {
      const closed = closeAll(listeners)
      // Each connection starts no more calls and ends with its last one.
      // (A socket's error, its client gone, comes before its close: only the close is awaited.)
      const drained = Promise.all([...connections].map(([socket, connection]) => {
        connection.shutdown()
        return new Promise((resolve) => socket.once('close', resolve))
      }))
      const cut = setTimeout(() => {
        for (const socket of connections.keys()) socket.destroy()
      }, sendTimeoutMs)
      const streamsEnded = streams.close(sendTimeoutMs)
      await drained
      clearTimeout(cut)
      server.forceShutdown()
      await Promise.all([closed, streamsEnded])
      models.endSequences()
      await models.closeTraces()
    }
  }
}
