/**
 * A real gRPC server on 127.0.0.1 (grpc-js, port 0) serving `inference.GRPCInferenceService` as a
 * host would build it from the package's parts, and a grpc-js client calling it. Both are closed
 * when the test ends.
 */
import {
  credentials, makeGenericClientConstructor, Metadata, Server, ServerCredentials, type ServiceError, type UntypedServiceImplementation
} from '@grpc/grpc-js'
import Fastify, { type FastifyInstance } from 'fastify'
import type { Test } from 'tap'
import { connectionInterceptor, inferenceService, MESSAGE_LIMIT_OPTIONS, modelInferHandler, sharedMemoryService } from '../../lib/grpc'
import fastifyTritonShm, { type FastifyTritonShmOptions, kserveModels, type ModelDeclaration, ModelTable } from '../../lib/index'
import type { SystemSharedMemoryRegistry } from '../../types'
import type { SharedMemoryServiceOptions } from '../../types/grpc'
import type { TestModel } from './kserve'

type Callback = (error: ServiceError | null, response?: unknown) => void
type UnaryMethod = (request: unknown, metadata: Metadata, options: object, callback: Callback) => { cancel(): void }

export interface GrpcClient {
  /** Calls `method`; resolves with its response, rejects with its ServiceError. */
  call<Response = any>(method: string, request?: object, metadata?: Record<string, string>): Promise<Response>
  /** Calls `method` expecting it to fail: resolves with the error (fails the test if it succeeds). */
  fail(method: string, request?: object, metadata?: Record<string, string>): Promise<ServiceError>
  /** Starts a call and returns a way to cancel it, and its outcome. */
  start(method: string, request?: object): { cancel(): void, outcome: Promise<unknown> }
  close(): void
}

const metadataOf = (entries: Record<string, string>) => {
  const metadata = new Metadata()
  for (const [key, value] of Object.entries(entries)) metadata.set(key, value)
  return metadata
}

/** A grpc-js client of `GRPCInferenceService` at `port`, with Triton's message limits. */
export function grpcClient (t: Test, port: number, limits = true): GrpcClient {
  const Client = inferenceService()
  const client = new Client(`127.0.0.1:${port}`, credentials.createInsecure(), limits ? MESSAGE_LIMIT_OPTIONS : {})
  t.teardown(() => client.close())
  const method = (name: string) => (client as unknown as Record<string, UnaryMethod>)[name].bind(client)
  const start = (name: string, request: object = {}, metadata: Record<string, string> = {}) => {
    let call: { cancel(): void } | undefined
    const outcome = new Promise((resolve, reject) => {
      call = method(name)(request, metadataOf(metadata), {}, (error, response) => (error === null ? resolve(response) : reject(error)))
    })
    return { cancel: () => call?.cancel(), outcome }
  }
  return {
    call: (name, request, metadata) => start(name, request, metadata).outcome as Promise<any>,
    fail: async (name, request, metadata) => {
      try {
        await start(name, request, metadata).outcome
      } catch (error) {
        return error as ServiceError
      }
      throw new Error(`${name} succeeded, a failure was expected`)
    },
    start: (name, request) => start(name, request),
    close: () => client.close()
  }
}

/** Starts a grpc-js server with `implementation` (Triton's message limits) on 127.0.0.1:0; resolves with its port. */
export async function startServer (t: Test, implementation: UntypedServiceImplementation, interceptors = [connectionInterceptor()]): Promise<number> {
  // As a host builds it: with the interceptor that lets the peer rule know its clients.
  const server = new Server({ ...MESSAGE_LIMIT_OPTIONS, interceptors })
  server.addService(inferenceService().service, implementation)
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (error, port) => (error === null ? resolve(port) : reject(error))))
  t.teardown(() => new Promise<void>((resolve) => server.tryShutdown(() => resolve())))
  return port
}

/** The test models in a model table, as both transports serve them. */
export const modelTable = (models: TestModel[]) =>
  new ModelTable(models.map(({ signature, execute }) => ({ ...signature, run: execute })))

/** An app with the plugin's own gRPC listener on port 0 serving `models` (`options.grpc` added to
 * it); closed when the test ends, unless the test closed it. */
export async function listenGrpcPlugin (t: Test, models: TestModel[], options: FastifyTritonShmOptions = {}):
Promise<{ app: FastifyInstance, port: number }> {
  const app = Fastify()
  let closed = false
  t.teardown(() => closed || app.close())
  app.addHook('onClose', async () => { closed = true })
  await app.register(fastifyTritonShm, { ...options, grpc: { port: 0, models: modelTable(models), ...options.grpc } })
  await app.ready()
  return { app, port: app.tritonGrpc.port as number }
}

/** A model table of `declarations` served over HTTP (`kserveModels`) and the plugin's gRPC
 * listener on port 0; closed when the test ends. */
export async function serveModelTable (t: Test, declarations: ModelDeclaration[]):
Promise<{ app: FastifyInstance, table: ModelTable, port: number }> {
  const table = new ModelTable(declarations)
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(fastifyTritonShm, { grpc: { port: 0, models: table } })
  await app.register(kserveModels, { models: table })
  await app.ready()
  return { app, table, port: app.tritonGrpc.port as number }
}

/** A host's server: the shared memory RPCs and ModelInfer over `registry` for `models`; and a client of it. */
export async function startHostServer (t: Test, registry: SystemSharedMemoryRegistry, models: TestModel[] = [],
  options: SharedMemoryServiceOptions = {}): Promise<{ port: number, client: GrpcClient }> {
  const port = await startServer(t, {
    ...sharedMemoryService(registry, options),
    ModelInfer: modelInferHandler({ registry, models: modelTable(models) })
  })
  return { port, client: grpcClient(t, port) }
}

/** Calls `method` of GRPCInferenceService with `message` sent as it is (no protobuf encoding): the
 * error it answers, or null. */
export type RawCall = (method: string, message: Buffer) => Promise<ServiceError | null>

/** A client of the RPCs `methods` that sends and receives bytes, unencoded: for messages no proto
 * client would make, and RPCs the package does not serve. Closed when the test ends. */
export function rawGrpcClient (t: Test, port: number, methods: string[]): RawCall {
  const bytes = (value: Buffer) => value
  const Client = makeGenericClientConstructor(Object.fromEntries(methods.map((name) => [name, {
    path: `/inference.GRPCInferenceService/${name}`,
    requestStream: false,
    responseStream: false,
    requestSerialize: bytes,
    requestDeserialize: bytes,
    responseSerialize: bytes,
    responseDeserialize: bytes
  }])), 'GRPCInferenceService')
  const client = new Client(`127.0.0.1:${port}`, credentials.createInsecure())
  t.teardown(() => client.close())
  const calls = client as unknown as Record<string, (request: Buffer, callback: (error: ServiceError | null) => void) => void>
  return async (method, message) => await new Promise((resolve) => calls[method](message, resolve))
}
