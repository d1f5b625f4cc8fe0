/** The KServe server metadata (`GET /v2`, gRPC `ServerMetadata`) of a service built on this package. */
import type { ServerMetadataResponse } from '../../types/models'

/**
 * The protocol extensions served, in Triton's order: classification (of an output, by the infer
 * helpers), sequences, model configuration (the model table), system shared memory (the plugin),
 * binary tensor data (`readInferRequest`), parameters (a request's, given to its model),
 * statistics and trace (the model table). perf_analyzer asks for statistics only when `statistics`
 * is listed.
 */
export const SERVER_EXTENSIONS: readonly string[] = Object.freeze([
  'classification', 'sequence', 'model_configuration', 'system_shared_memory', 'binary_tensor_data', 'parameters', 'statistics', 'trace'
])

/** Served only by a table that serves the model repository extension (Triton lists both: its
 * optional `unload_dependents` parameter is taken, and a model here has no dependents). */
export const REPOSITORY_EXTENSIONS: readonly string[] = Object.freeze(['model_repository', 'model_repository(unload_dependents)'])

/** `repository`: the model repository extension is served, listed where Triton lists it (before
 * `model_configuration`); `logging`: the logging extension is, listed last, as Triton lists it. */
export function serverMetadata (name: string, version: string,
  { repository = false, logging = false }: { repository?: boolean, logging?: boolean } = {}): ServerMetadataResponse {
  const extensions = [...SERVER_EXTENSIONS]
  if (repository) extensions.splice(extensions.indexOf('model_configuration'), 0, ...REPOSITORY_EXTENSIONS)
  if (logging) extensions.push('logging')
  return { name, version, extensions }
}
