/**
 * The service's API in a browser: @fastify/swagger collects the routes' schemas into an OpenAPI
 * document, and @fastify/swagger-ui serves it at /documentation, where each operation can be
 * read and tried. Registered before the plugin, so the document sees the plugin's routes.
 */
import swagger from '@fastify/swagger'
import swaggerUi from '@fastify/swagger-ui'
import type { FastifyInstance } from 'fastify'
import { version } from '../package.json'

export const DOCUMENTATION_PREFIX = '/documentation'

export async function registerDocumentation (app: FastifyInstance): Promise<void> {
  await app.register(swagger, {
    openapi: {
      info: {
        title: 'fastify-triton-shm example service',
        description: 'A KServe V2 inference service with Triton\'s System Shared Memory API, served by fastify-triton-shm.',
        version
      },
      tags: [
        { name: 'System Shared Memory', description: 'Regions of POSIX shared memory the client made, registered for inference' },
        { name: 'CUDA Shared Memory', description: 'Answered as a server without GPUs' },
        { name: 'KServe', description: 'The example\'s server, health, model and inference routes' }
      ]
    }
  })
  await app.register(swaggerUi, {
    routePrefix: DOCUMENTATION_PREFIX,
    // The operationIds are the names Triton's clients and generated SDKs know the operations by.
    uiConfig: { displayOperationId: true, docExpansion: 'list', tryItOutEnabled: true }
  })
}
