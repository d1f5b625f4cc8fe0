/**
 * Schemas of the KServe V2 model endpoints, for the OpenAPI document a host's @fastify/swagger
 * publishes: operationId, tags, summary, description, parameters and response shapes. The
 * routes check their input themselves (the model table resolves names and versions with
 * Triton's errors), so these schemas validate nothing a client sends.
 */
import type { KServeModelsOpenApiOptions } from './models-options'
import { errorResponseSchema } from './shared-memory-schemas'

const KSERVE_TAG = 'KServe'

/** The route of each schema. */
export type ModelRoute =
  | 'serverMetadata' | 'serverLive' | 'serverReady' | 'allModelStatistics'
  | 'modelMetadata' | 'modelReady' | 'modelConfig' | 'modelStatistics' | 'modelInfer' | 'modelGenerate' | 'modelGenerateStream'

/** A route's schema, at a path naming a model (`model`) or a model and a version (`modelVersion`). */
export type ModelSchemas = Record<ModelRoute, Record<'model' | 'modelVersion', Record<string, unknown>>>

const params = (withVersion: boolean) => ({
  type: 'object',
  required: withVersion ? ['model', 'version'] : ['model'],
  properties: {
    model: { type: 'string', description: 'Name of the model' },
    ...(withVersion && { version: { type: 'string', description: 'Version of the model, a number' } })
  }
})

const errors = {
  '4xx': { description: 'Unknown model or version, a version that is no number, or a refused request', ...errorResponseSchema },
  '5xx': { description: 'The model version is not ready (503), or the model failed', ...errorResponseSchema }
}

const anyObject = (description: string) => ({ description, type: 'object', additionalProperties: true })

interface RouteDoc {
  operationId: string
  summary: string
  description: string
  response: Record<string, unknown>
  /** Served at a model path and a model version path. */
  perModel?: true
}

const ROUTES: Record<ModelRoute, RouteDoc> = {
  serverMetadata: {
    operationId: 'serverMetadata',
    summary: 'Server metadata',
    description: 'The server\'s name, version and the protocol extensions it supports.',
    response: { 200: anyObject('Server metadata: name, version, extensions') }
  },
  serverLive: {
    operationId: 'serverLive',
    summary: 'Server liveness',
    description: 'Answers 200 while the server can receive requests.',
    response: { 200: { description: 'The server is live' } }
  },
  serverReady: {
    operationId: 'serverReady',
    summary: 'Server readiness',
    description: 'Answers 200 when every model has a ready version, 400 otherwise.',
    response: { 200: { description: 'The server is ready' }, 400: { description: 'A model has no ready version' } }
  },
  allModelStatistics: {
    operationId: 'allModelStatistics',
    summary: 'Statistics of every model',
    description: 'Triton\'s statistics of every ready version of every model.',
    response: { 200: anyObject('model_stats, one entry per model version'), ...errors }
  },
  modelMetadata: {
    operationId: 'Metadata',
    summary: 'Model metadata',
    description: 'The model\'s name, ready versions, platform, inputs and outputs (a leading -1 is the batch dimension).',
    response: { 200: anyObject('Model metadata'), ...errors },
    perModel: true
  },
  modelReady: {
    operationId: 'Ready',
    summary: 'Model readiness',
    description: 'Answers 200 when the model (any version, or the version named) is ready, 400 when it is not.',
    response: { 200: { description: 'The model is ready' }, 400: { description: 'The model is not ready', ...errorResponseSchema }, ...errors },
    perModel: true
  },
  modelConfig: {
    operationId: 'Config',
    summary: 'Model configuration',
    description: 'Triton\'s model configuration (the fields perf_analyzer and Triton\'s clients read).',
    response: { 200: anyObject('Triton\'s model configuration'), ...errors },
    perModel: true
  },
  modelStatistics: {
    operationId: 'Statistics',
    summary: 'Model statistics',
    description: 'Triton\'s statistics of the version named, or of every ready version of the model: ' +
      'request counts and the time spent queued, reading inputs, inferring and writing outputs.',
    response: { 200: anyObject('model_stats, one entry per model version'), ...errors },
    perModel: true
  },
  modelInfer: {
    operationId: 'Infer',
    summary: 'Inference',
    description: 'Runs the model on a KServe V2 infer request: tensors as JSON, binary data or in system shared memory.',
    response: { 200: anyObject('The infer response (a JSON header then binary outputs, with Inference-Header-Content-Length)'), ...errors },
    perModel: true
  },
  modelGenerate: {
    operationId: 'Generate',
    summary: 'Generate',
    description: 'Triton\'s generate extension: the body\'s keys that name inputs of the model are those inputs (a value or a flat array), ' +
      'the others, and those under `parameters`, request parameters; the model\'s one response as a JSON object.',
    response: { 200: anyObject('id, model_name, model_version and each output, by name'), ...errors },
    perModel: true
  },
  modelGenerateStream: {
    operationId: 'GenerateStream',
    summary: 'Generate, streamed',
    description: 'As generate, each response of the model (a decoupled model sends any number) as a Server-Sent Event ' +
      '(`data: {...}`); an error of the run is an event `data: {"error": ...}` that ends the stream.',
    response: { 200: { description: 'text/event-stream; charset=utf-8: one event per response' }, ...errors },
    perModel: true
  }
}

/** The schemas as the host's document shows them: with the configured tags and operationId prefix, or hidden. */
export function modelSchemas ({ hide = false, tags = [KSERVE_TAG], operationIdPrefix = '' }: KServeModelsOpenApiOptions): ModelSchemas {
  const schemaOf = ({ operationId, summary, description, response, perModel }: RouteDoc, of: 'model' | 'modelVersion') => ({
    hide,
    tags,
    summary,
    description,
    operationId: operationIdPrefix + (perModel === true ? `${of}${operationId}` : operationId),
    ...(perModel === true && { params: params(of === 'modelVersion') }),
    response
  })
  const entries = Object.entries(ROUTES).map(([route, doc]) => [route, { model: schemaOf(doc, 'model'), modelVersion: schemaOf(doc, 'modelVersion') }])
  return Object.fromEntries(entries) as ModelSchemas
}
