/**
 * fastify-triton-shm/grpc: KServe V2 over gRPC (`inference.GRPCInferenceService`, Triton's port
 * 8001) on the same registry as the HTTP API. @grpc/grpc-js and @grpc/proto-loader are optional
 * peer dependencies, loaded only here.
 */
export { inferenceService, GRPC_LOADER_OPTIONS, MAX_MESSAGE_BYTES, MESSAGE_LIMIT_OPTIONS, PROTO_PATH } from './protocol'
export { sharedMemoryService } from './shared-memory-service'
export { connectionInterceptor } from './connection-interceptor'
export { modelInferRequest, modelInferResponse, readModelInferRequest } from './model-infer'
export { modelInferHandler, type ModelInferHandlerOptions } from './model-infer-handler'
export { modelStreamInferHandler, OpenStreams, DEFAULT_STREAM_REQUESTS_IN_FLIGHT, type ModelStreamInferOptions } from './model-stream-infer'
export { requestParameters, type RequestParameters } from './request-parameters'
export { repositoryHandlers } from './repository-service'
export { inferenceServiceHandlers, type InferenceServiceOptions, type ModelServiceOptions } from './inference-service'
export { GRPC_CODE, toServiceError, Status, type ErrorLogger } from './status'
export type * from '../../types/grpc'
export { GrpcKServeClient, type GrpcClientOptions } from './client'
