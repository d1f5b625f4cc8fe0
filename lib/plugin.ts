/**
 * The plugin: options -> registry -> the shared memory API's rules -> its faces (HTTP routes under
 * the prefix, and the gRPC listener when asked for) -> onClose. The outer function is not
 * encapsulated: it decorates the host instance with the registry, so every plugin of the app can
 * lease regions; the routes live in an encapsulated child.
 */
import type { FastifyPluginAsync, RegisterOptions } from 'fastify'
import fp from 'fastify-plugin'
import { type GrpcListener, listenGrpc } from './grpc/grpc-server'
import { sharedMemoryRoutes } from './http/shared-memory-routes'
import { DEFAULT_DECORATOR } from './http/decorator'
import { checkPluginOptions, type FastifyTritonShmOptions } from './plugin-options'
import { Registry } from './registry/registry'
import { SharedMemoryApi } from './registry/shared-memory-api'
import { RestrictedFeatures, restrictionGroups } from './util/restricted-features'

const PLUGIN = 'fastify-triton-shm'

/** Fastify's own register options: a plugin wrapped with fastify-plugin gets no context of its
 * own to apply them to, so the registry's logger and the routes' child take them here. */
type LogOptions = Pick<RegisterOptions, 'logLevel' | 'logSerializers'>

const plugin: FastifyPluginAsync<FastifyTritonShmOptions & LogOptions> = async (app, options) => {
  const {
    prefix, decorator = DEFAULT_DECORATOR, allowClientShm, clientShmAccess, restrictedApi, restrictedApis, openapi = {}, logLevel,
    logSerializers, grpc, ...registryOptions
  } = checkPluginOptions(options)
  // `restrictedApi` is the shared-memory category on both transports.
  const restrictions = new RestrictedFeatures(restrictionGroups(restrictedApis, restrictedApi), 'http', PLUGIN)
  const grpcRestrictions = new RestrictedFeatures(restrictionGroups(grpc?.restrictedProtocols, restrictedApi), 'grpc', `${PLUGIN} grpc`)
  const logger = logLevel === undefined ? app.log : app.log.child({}, { level: logLevel })
  const registry = new Registry({ ...registryOptions, logger })
  const api = new SharedMemoryApi(registry, { allowClientShm, clientShmAccess, log: logger })
  app.decorate(decorator, registry)
  let grpcListener: GrpcListener | undefined
  if (grpc !== undefined) {
    app.decorate('tritonGrpc', { getter: () => ({ port: grpcListener?.port, path: grpcListener?.path }) })
    app.addHook('onReady', async () => {
      grpcListener = await listenGrpc(grpc, { api, restrictions: grpcRestrictions, log: logger })
      const { port, path } = grpcListener
      logger.info({ ...(port !== undefined && { port }), ...(path !== undefined && { path }) }, 'KServe gRPC listening')
    })
  }
  // The listener's stop begins with the app's (preClose): from then on new calls and new stream
  // requests are refused at once, as Triton's are, while those in flight finish. The gRPC calls in
  // flight end before the registry closes under them (onClose).
  let grpcClosed: Promise<void> | undefined
  const closeGrpc = () => (grpcClosed ??= grpcListener?.close() ?? Promise.resolve())
  app.addHook('preClose', async () => { closeGrpc().catch(() => {}) })
  app.addHook('onClose', async () => {
    await closeGrpc()
    registry.close()
  })
  await app.register(sharedMemoryRoutes, { prefix, logLevel, logSerializers, api, restrictions, openapi })
}

export const fastifyTritonShm = fp(plugin, { fastify: '5.x', name: 'fastify-triton-shm' })
