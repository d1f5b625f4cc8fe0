/**
 * The wire shapes every transport serves from the model table: KServe V2 server and model
 * metadata, Triton's model configuration and statistics.
 */
import type { Datatype, TensorSpec } from './kserve'

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
  optional: boolean
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

/** Triton's `sequence_batching.control_input[]` entry. */
export interface ModelSequenceControlInputConfig {
  name: string
  control: Array<{
    kind: 'CONTROL_SEQUENCE_START' | 'CONTROL_SEQUENCE_END' | 'CONTROL_SEQUENCE_READY' | 'CONTROL_SEQUENCE_CORRID'
    int32_false_true: number[]
    fp32_false_true: number[]
    bool_false_true: boolean[]
    /** CORRID's datatype; `TYPE_INVALID` for the others. */
    data_type: ConfigDatatype | 'TYPE_INVALID'
  }>
}

/** Triton's `sequence_batching` of a stateful model: the direct strategy, its idle timeout, its controls. */
export interface ModelSequenceBatchingConfig {
  direct: { max_queue_delay_microseconds: number, minimum_slot_utilization: number }
  max_sequence_idle_microseconds: number
  control_input: ModelSequenceControlInputConfig[]
  state: []
  iterative_sequence: false
}

/** Triton's `ensemble_scheduling` of an ensemble. */
export interface ModelEnsemblingConfig {
  step: Array<{
    model_name: string
    /** -1: the newest ready version. */
    model_version: number
    input_map: Record<string, string>
    output_map: Record<string, string>
    model_namespace: string
  }>
}

/**
 * `GET /v2/models/<m>[/versions/<v>]/config`: Triton's model configuration, every field Triton
 * prints that perf_analyzer and Triton's clients read, enums as strings. No `dynamic_batching`:
 * this server batches nothing; `sequence_batching` only for a stateful model, `ensemble_scheduling` for an ensemble.
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
  /** Set for a stateful model (a declaration's `sequenceBatching`). */
  sequence_batching?: ModelSequenceBatchingConfig
  /** Set for an ensemble (a declaration's `ensembleScheduling`). */
  ensemble_scheduling?: ModelEnsemblingConfig
  model_transaction_policy: { decoupled: boolean }
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

/** What a load request asks for besides the model's name (Triton's load parameters), handed to a
 * model's `load` hook only when the table allows it (`repository: { allowOverrides: true }`). */
export interface ModelLoadOverrides {
  /** The `config` parameter: a model configuration, as JSON text. */
  config?: string
  /** The `file:<version>/<name>` parameters' bytes, by parameter name. */
  files: Record<string, Uint8Array>
}

/** A model version's state in the repository index. */
export type ModelState = 'READY' | 'UNAVAILABLE' | 'LOADING'

/** One entry of the repository index (`POST /v2/repository/index`, gRPC `RepositoryIndex`). */
export interface RepositoryIndexEntry {
  name: string
  version: string
  state: ModelState
  /** Why the version is not ready (absent when it is). */
  reason?: string
}
