/**
 * The plugin's gRPC listener (`grpc` option): a grpc-js server on its own port (grpc-js cannot
 * share Fastify's) serving `GRPCInferenceService` over the plugin's shared memory API and model
 * table, with Triton's message limits. It listens once the app is ready and stops, after its calls
 * in flight, when the app closes.
 */
import type { Server } from '@grpc/grpc-js'
import { ModelTable } from '../models/model-table'
import type { SharedMemoryApi } from '../registry/shared-memory-api'
import { connectionInterceptor } from './connection-interceptor'
import { inferenceServiceOver } from './inference-service'
import type { GrpcListenerOptions } from './listener-options'
import { grpcJs } from './peers'
import { inferenceService, MESSAGE_LIMIT_OPTIONS } from './protocol'
import type { ErrorLogger } from './status'

/** Triton's gRPC port. */
export const DEFAULT_GRPC_PORT = 8001

export interface GrpcListener {
  /** The port bound (the one asked for, or the system's choice for port 0). */
  readonly port: number
  /** Stops accepting calls, and resolves once the calls in flight have ended. */
  close(): Promise<void>
}

export interface GrpcListenerContext {
  api: SharedMemoryApi
  log: ErrorLogger
}

/** Starts the listener; rejects (e.g. the port is taken) with grpc-js's error. */
export async function listenGrpc (options: GrpcListenerOptions, { api, log }: GrpcListenerContext): Promise<GrpcListener> {
  const grpc = grpcJs()
  const { host = '127.0.0.1', port = DEFAULT_GRPC_PORT, models = new ModelTable([]), server: metadata, limits } = options
  const handlers = inferenceServiceOver(api, { models, limits, log, server: metadata ?? { name: 'fastify-triton-shm', version: '' } })
  // The interceptor tells the shared memory RPCs their calls' connections: the peer rule's input.
  const server: Server = new grpc.Server({ ...MESSAGE_LIMIT_OPTIONS, interceptors: [connectionInterceptor()] })
  server.addService(inferenceService().service, handlers)
  const address = host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`
  const bound = await new Promise<number>((resolve, reject) =>
    server.bindAsync(address, grpc.ServerCredentials.createInsecure(), (error, boundPort) => (error === null ? resolve(boundPort) : reject(error))))
  return {
    port: bound,
    close: () => new Promise<void>((resolve) => server.tryShutdown(() => resolve()))
  }
}
