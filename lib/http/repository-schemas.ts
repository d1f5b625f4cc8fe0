/**
 * Schemas of the model repository routes, for the OpenAPI document a host's @fastify/swagger
 * publishes (with the model endpoints' tags and operationId prefix). They document; the routes
 * check what they read themselves, with Triton's messages.
 */
import type { KServeModelsOpenApiOptions } from './models-options'
import { errorResponseSchema } from './shared-memory-schemas'

const params = {
  type: 'object',
  required: ['model'],
  properties: { model: { type: 'string', description: 'Name of the model' } }
}

const failures = {
  '4xx': { description: 'A refused request (a parameter of the wrong type, overrides the server does not take, a failed load)', ...errorResponseSchema },
  '5xx': { description: 'The model is not one the server declares (Triton\'s INTERNAL), or the server failed', ...errorResponseSchema }
}

const done = { 200: { description: 'Done: an empty body' }, ...failures }

const ROUTES = {
  index: {
    operationId: 'repositoryIndex',
    summary: 'Model repository index',
    description: 'Every version of every model the server declares, with its state (READY, UNAVAILABLE with its reason, LOADING). ' +
      'Body (optional): {"ready": true} lists the ready ones only.',
    response: {
      200: {
        description: 'The index',
        type: 'array',
        items: {
          type: 'object',
          properties: { name: { type: 'string' }, version: { type: 'string' }, state: { type: 'string' }, reason: { type: 'string' } }
        }
      },
      ...failures
    }
  },
  load: {
    operationId: 'repositoryModelLoad',
    summary: 'Load a model',
    description: 'Loads (or reloads) every version of the model, in every process of the service. Body (optional): ' +
      '{"parameters": {"config": "<model configuration JSON>", "file:<version>/<name>": "<base64>"}}, taken only if the server allows it.',
    params,
    response: done
  },
  unload: {
    operationId: 'repositoryModelUnload',
    summary: 'Unload a model',
    description: 'Unloads every version of the model, in every process of the service: its requests are refused from then on. ' +
      'Body (optional): {"parameters": {"unload_dependents": boolean}}.',
    params,
    response: done
  }
}

export type RepositoryRoute = keyof typeof ROUTES

export function repositorySchemas ({ hide = false, tags = ['KServe'], operationIdPrefix = '' }: KServeModelsOpenApiOptions):
Record<RepositoryRoute, Record<string, unknown>> {
  const schemaOf = ({ operationId, ...doc }: typeof ROUTES[RepositoryRoute]) => ({ hide, tags, ...doc, operationId: operationIdPrefix + operationId })
  return { index: schemaOf(ROUTES.index), load: schemaOf(ROUTES.load), unload: schemaOf(ROUTES.unload) }
}
