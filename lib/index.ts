/**
 * fastify-triton-shm: Triton's System Shared Memory API for Fastify.
 *
 * The outer plugin (not encapsulated) builds the registry and decorates the host instance with it,
 * so every plugin of the app can lease regions; the routes live in an encapsulated child under
 * the configured prefix.
 */
import type { FastifyPluginAsync, RegisterOptions } from 'fastify'
import fp from 'fastify-plugin'
import type { FastifyTritonShmOptions, SystemSharedMemoryRegistry } from '../types'
import { type GrpcListener, listenGrpc } from './grpc/grpc-server'
import { checkOptions, DEFAULT_DECORATOR } from './options'
import { Registry } from './registry'
import { routes } from './routes'

/** Fastify's own register options: a plugin wrapped with fastify-plugin gets no context of its
 * own to apply them to, so the registry's logger and the routes' child take them here. */
type LogOptions = Pick<RegisterOptions, 'logLevel' | 'logSerializers'>

const plugin: FastifyPluginAsync<FastifyTritonShmOptions & LogOptions> = async (app, options) => {
  const {
    prefix, decorator = DEFAULT_DECORATOR, allowClientShm = true, restrictedApi, openapi = {}, logLevel, logSerializers,
    grpc, ...registryOptions
  } = checkOptions(options)
  const logger = logLevel === undefined ? app.log : app.log.child({}, { level: logLevel })
  const registry = new Registry({ ...registryOptions, logger })
  app.decorate(decorator, registry)
  let grpcListener: GrpcListener | undefined
  if (grpc !== undefined) {
    app.decorate('tritonGrpc', { getter: () => ({ port: grpcListener?.port }) })
    app.addHook('onReady', async () => {
      grpcListener = await listenGrpc(grpc, { registry, allowClientShm, restrictedApi, log: logger })
      logger.info({ port: grpcListener.port }, 'KServe gRPC listening')
    })
  }
  // The gRPC calls in flight end before the registry closes under them.
  app.addHook('onClose', async () => {
    await grpcListener?.close()
    registry.close()
  })
  await app.register(routes, { prefix, logLevel, logSerializers, registry, allowClientShm, restrictedApi, openapi })
}

const fastifyTritonShm = fp(plugin, { fastify: '5.x', name: 'fastify-triton-shm' })

export default fastifyTritonShm
export { fastifyTritonShm }
export { Registry, DEFAULT_LIMITS } from './registry'
export { DEFAULT_RESERVED_KEY_PREFIXES } from './key-policy'
export { SharedMemoryError } from './errors'
export { PosixShmError, MappedRange, createObject, isIntact, mapObject, unlinkObject, unmapObject } from './posix-shm'
// Named one by one: Node's ESM import of this CommonJS build finds only names it can read here
// (it cannot follow `export *` past the `module.exports =` below).
export {
  readInferRequest, InferRequest, type ReadInferRequestOptions, inferBodyParser, parseInferBody, useInferBodyParser,
  InferBody, HEADER_LENGTH_HEADER, type InferBodyOptions, DEFAULT_INFER_LIMITS, DEFAULT_JSON_LIMIT, kserveErrorHandler,
  DATATYPES, elementBytes, elementCount, parseBytesTensor, readBytesElements, serializedSize, writeBytesTensor
} from './kserve'
export { apiFrameworkErrors } from './framework-errors'
export { ModelTable, serverMetadata, SERVER_EXTENSIONS } from './models'
export { kserveModels } from './http/models-plugin'
export { KServeClient, ServerError, SharedMemoryObject, type ClientOptions } from './client'
export type * from '../types'

declare module 'fastify' {
  interface FastifyInstance {
    /** The system shared memory registry (decorator name configurable with the `decorator` option). */
    systemSharedMemory: SystemSharedMemoryRegistry
    /** With the `grpc` option: the gRPC listener's bound port, once the app is ready. */
    tritonGrpc: { port: number | undefined }
  }
}

// CommonJS callers get the plugin itself from require(), with every named export on it.
module.exports = Object.assign(fastifyTritonShm, module.exports)
