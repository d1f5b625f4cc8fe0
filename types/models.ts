/**
 * The model table: a model declared once (its signature, what Triton's model configuration says
 * of it, and its run function), and the wire shapes every transport serves from it (KServe V2
 * server and model metadata, Triton's model configuration and statistics).
 */
import type { FastifyRequest } from 'fastify'
import type { InferRequest } from '../lib/kserve/infer-request'
import type { ModelTable } from '../lib/models/model-table'
import type { Datatype, InferLimits, ModelSignature, TensorSpec } from './kserve'

/**
 * One model (at one or more versions) as the host declares it: its KServe signature (`versions`
 * default `['1']`; -1 in a shape is any size; with `maxBatchSize` above 0 the first dimension of
 * every tensor is the batch), what Triton's model configuration adds, and what runs it.
 */
export interface ModelDeclaration extends ModelSignature {
  /** Triton's `backend` (`onnxruntime`, `python`, ...): shown in the configuration. Default `''`. */
  backend?: string
  /** Triton's `label_filename` of an output, by output name: shown in the configuration. */
  labelFilenames?: Record<string, string>
  /** Whether the model starts ready (see `ModelTable.setReady`). Default true. */
  ready?: boolean
  /** Reads the inputs and fills the outputs of one request; may be async. A throw fails the request. */
  run(infer: InferRequest): void | Promise<void>
}

/** `GET /v2`: the server metadata. */
export interface ServerMetadataResponse {
  name: string
  version: string
  extensions: string[]
}

/** `GET /v2/models/<m>[/versions/<v>]`: the model metadata. */
export interface ModelMetadataResponse {
  name: string
  /** Every ready version of the model, ascending. */
  versions: string[]
  platform: string
  inputs: TensorSpec[]
  outputs: TensorSpec[]
}

/** Triton's datatype names in a model configuration (`BYTES` is `TYPE_STRING`). */
export type ConfigDatatype = `TYPE_${Exclude<Datatype, 'BYTES'>}` | 'TYPE_STRING'

export interface ModelInputConfig {
  name: string
  data_type: ConfigDatatype
  format: 'FORMAT_NONE'
  /** The shape without the batch dimension when `max_batch_size` is above 0. */
  dims: number[]
  is_shape_tensor: false
  allow_ragged_batch: false
  optional: false
  is_non_linear_format_io: false
}

export interface ModelOutputConfig {
  name: string
  data_type: ConfigDatatype
  dims: number[]
  label_filename: string
  is_shape_tensor: false
  is_non_linear_format_io: false
}

/**
 * `GET /v2/models/<m>[/versions/<v>]/config`: Triton's model configuration, every field Triton
 * prints that perf_analyzer and Triton's clients read, enums as strings. No `dynamic_batching` or
 * `sequence_batching`: this server batches nothing and keeps no sequences.
 */
export interface ModelConfigResponse {
  name: string
  platform: string
  backend: string
  runtime: string
  version_policy: { specific: { versions: number[] } }
  /** 0: no batch dimension. A model that takes any batch shows Triton's largest, 2147483647. */
  max_batch_size: number
  input: ModelInputConfig[]
  output: ModelOutputConfig[]
  batch_input: []
  batch_output: []
  instance_group: Array<{
    name: string
    kind: 'KIND_CPU'
    count: number
    gpus: []
    secondary_devices: []
    profile: []
    passive: false
    host_policy: string
  }>
  default_model_filename: string
  cc_model_filenames: Record<string, never>
  metric_tags: Record<string, never>
  parameters: Record<string, never>
  model_warmup: []
  model_transaction_policy: { decoupled: false }
  response_cache: { enable: false }
}

/** A count of requests and the nanoseconds they took in total. */
export interface StatisticDuration {
  count: number
  ns: number
}

/** The statistics of one model version, in Triton's shape (`GET .../stats`). */
export interface ModelStatistics {
  name: string
  /** The version, a string of digits. */
  version: string
  /** Milliseconds since the epoch of the last request that reached the model (0: never). */
  last_inference: number
  /** Batch elements inferred (one per request for a model without a batch dimension). */
  inference_count: number
  /** Model runs. */
  execution_count: number
  inference_stats: {
    /** Requests that succeeded, and their whole time in the server. */
    success: StatisticDuration
    /** Requests that failed once their model was found, and their whole time in the server. */
    fail: StatisticDuration
    /** Time of each successful request before its inputs were read or its model ran (waiting). */
    queue: StatisticDuration
    /** Reading the inputs: the request's tensors, from JSON, binary data or shared memory. */
    compute_input: StatisticDuration
    /** The model's run. */
    compute_infer: StatisticDuration
    /** Encoding the response (outputs in shared memory are written by the run itself). */
    compute_output: StatisticDuration
    cache_hit: StatisticDuration
    cache_miss: StatisticDuration
  }
  response_stats: Record<string, never>
  /** Per batch size seen, the compute durations of its successful requests. */
  batch_stats: Array<{
    batch_size: number
    compute_input: StatisticDuration
    compute_infer: StatisticDuration
    compute_output: StatisticDuration
  }>
  memory_usage: []
}

/** `GET /v2/models[/<m>[/versions/<v>]]/stats`. */
export interface ModelStatisticsResponse {
  model_stats: ModelStatistics[]
}

/**
 * One inference through `ModelTable.infer`, in the transport's terms: how to read the request,
 * what to do before the run, and how to answer. Each step is timed into the model's statistics.
 */
export interface InferCall<Result> {
  /** Reads the request for the resolved model's signature (timed as `compute_input`). A request
   * already read is given as `() => infer`. A throw fails the request. */
  read(signature: ModelSignature): InferRequest
  /** Awaited once the request is read, before the run (timed as `queue`): admission, tracing. */
  beforeRun?(infer: InferRequest): void | Promise<void>
  /** The response, from the outputs the run filled (timed as `compute_output`). */
  respond(infer: InferRequest): Result
}

/** How the model endpoints appear in a host's OpenAPI document (@fastify/swagger). */
export interface KServeModelsOpenApiOptions {
  /** Leave every model endpoint out of the document. Default false. */
  hide?: boolean
  /** Tags of the routes. Default `['KServe']`. */
  tags?: string[]
  /** Put before every operationId (two registrations in one document need distinct ids). Default none. */
  operationIdPrefix?: string
}

/** Options of the `kserveModels` plugin: the KServe V2 server, health and model endpoints. */
export interface KServeModelsOptions {
  /** The models to serve (the same table a gRPC service may serve). */
  models: ModelTable
  /** The server's name in its metadata (`GET /v2`). Default `fastify-triton-shm`. */
  name?: string
  /** The server's version in its metadata. Default `''`: give your service's. */
  version?: string
  /** Name of the registry decorator that resolves `shared_memory_region` parameters: the
   * `decorator` option fastify-triton-shm was registered with. Default `systemSharedMemory`. */
  decorator?: string
  /** Largest infer body, JSON and binary data together, in bytes. Default: Fastify's `bodyLimit`. */
  bodyLimit?: number
  /** Largest JSON part of an infer body, in bytes. Default 64 MiB, as Triton's. */
  jsonLimit?: number
  /** What one infer request may cost (defaults: `DEFAULT_INFER_LIMITS`). */
  limits?: InferLimits
  /** Awaited once an infer request is read (it holds its regions), before its model runs: a host's
   * admission control or tracing. Its time counts as `queue` in the statistics; a throw fails the request. */
  beforeRun?: (request: FastifyRequest, infer: InferRequest) => void | Promise<void>
  openapi?: KServeModelsOpenApiOptions
}
