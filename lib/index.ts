/**
 * fastify-triton-shm: Triton's System Shared Memory API for Fastify. The public exports: the
 * plugin (lib/plugin.ts), the registry and its errors, the KServe V2 helpers, the model table and
 * its HTTP endpoints, and the client. gRPC and ONNX Runtime have their own entries
 * (`fastify-triton-shm/grpc`, `fastify-triton-shm/onnxruntime`).
 */
import type { SystemSharedMemoryRegistry } from '../types'
import { fastifyTritonShm } from './plugin'

export default fastifyTritonShm
export { fastifyTritonShm }
// Named one by one: Node's ESM import of this CommonJS build finds only names it can read here
// (it cannot follow `export *` past the `module.exports =` below).
export { type FastifyTritonShmOptions } from './plugin-options'
export { Registry, DEFAULT_LIMITS } from './registry/registry'
export { DEFAULT_RESERVED_KEY_PREFIXES } from './registry/key-policy'
export { InFlightBytes, DEFAULT_MAX_IN_FLIGHT_BYTES } from './registry/in-flight-bytes'
export { SharedMemoryApi, type SharedMemoryApiOptions, type ApiCaller, type Memory, type Operation } from './registry/shared-memory-api'
export { type ClientShmAccess, type CallerConnection } from './registry/peer-policy'
export { TritonError, errorCodes, type ErrorKind, type AnsweredKind, type CodedError } from './errors'
export { PosixShmError, MappedRange, createObject, isIntact, mapObject, unlinkObject, unmapObject } from './addon/posix-shm'
export { InferRequest, type ReadInferRequestOptions, type ResponseSender } from './kserve/infer-request'
export { DEFAULT_INFER_LIMITS, DEFAULT_JSON_LIMIT } from './kserve/infer-limits'
export { DATATYPES, elementBytes, elementCount } from './kserve/datatypes'
export { parseBytesTensor, readBytesElements, serializedSize, writeBytesTensor } from './kserve/bytes-tensor'
export { ModelTable, type InferCall, type StreamCall, type ModelTableOptions, type VersionMetrics } from './models/model-table'
export { type ModelControlMode, type ModelRepositoryOptions, type RepositoryLogger } from './models/model-repository'
export { type ModelDeclaration } from './models/declaration'
export { type TraceOptions, type TraceLevelName, type TraceMode, type TraceValues, DEFAULT_TRACE_VALUES } from './models/trace-settings'
export { serverMetadata, SERVER_EXTENSIONS, REPOSITORY_EXTENSIONS } from './models/server-metadata'
export { ServerLogging, TRITON_LOG_SETTINGS, pinoLevelOf, type LevelledLogger } from './models/server-logging'
export { tritonMetrics, DEFAULT_QUANTILES, type TritonMetrics, type TritonMetricsOptions, type MetricsRegister, type SummaryOptions } from './metrics/triton-metrics'
export { tritonMetricsPlugin, type TritonMetricsPluginOptions } from './http/metrics-plugin'
export { readInferRequest, inferResponse } from './http/infer-exchange'
export { inferBodyParser, parseInferBody, useInferBodyParser, InferBody, HEADER_LENGTH_HEADER, type InferBodyOptions } from './http/infer-body'
export { kserveErrorHandler, httpStatusOf } from './http/error-handler'
export { HTTP_STATUS } from './http/http-status'
export { apiFrameworkErrors } from './http/framework-errors'
export { kserveModels } from './http/models-plugin'
export { type KServeModelsOptions, type KServeModelsOpenApiOptions } from './http/models-options'
export { type GrpcListenerOptions } from './grpc/listener-options'
export { KServeClient, ServerError, type ClientOptions } from './client/kserve-client'
export { SharedMemoryObject } from './client/shared-memory-object'
export type * from '../types'

declare module 'fastify' {
  interface FastifyInstance {
    /** The system shared memory registry (decorator name configurable with the `decorator` option). */
    systemSharedMemory: SystemSharedMemoryRegistry
    /** With the `grpc` option: the gRPC listener's bound port and its Unix socket's path (each
     * undefined when it does not listen there), once the app is ready. */
    tritonGrpc: { port: number | undefined, path: string | undefined }
  }
}

// CommonJS callers get the plugin itself from require(), with every named export on it.
module.exports = Object.assign(fastifyTritonShm, module.exports)
