/** The KServe server metadata (`GET /v2`, gRPC `ServerMetadata`) of a service built on this package. */
import type { ServerMetadataResponse } from '../../types/models'

/**
 * The protocol extensions served, in Triton's order: model configuration and statistics (the
 * model table), system shared memory (the plugin), binary tensor data (`readInferRequest`).
 * perf_analyzer asks for statistics only when `statistics` is listed.
 */
export const SERVER_EXTENSIONS: readonly string[] = Object.freeze(['model_configuration', 'system_shared_memory', 'binary_tensor_data', 'statistics'])

export function serverMetadata (name: string, version: string): ServerMetadataResponse {
  return { name, version, extensions: [...SERVER_EXTENSIONS] }
}
