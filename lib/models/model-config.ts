/**
 * What a declaration says, as Triton says it: the KServe model metadata and Triton's model
 * configuration (the fields perf_analyzer and Triton's clients read, enums as strings, int64
 * values as JSON numbers).
 */
import type { TensorSpec } from '../../types/kserve'
import type { ConfigDatatype, ModelConfigResponse, ModelMetadataResponse } from '../../types/models'
import type { ModelDeclaration } from './declaration'

/** Triton's `max_batch_size` is an int32: a model that takes any batch shows the largest. */
const INT32_MAX = 2 ** 31 - 1

const configDatatype = ({ datatype }: TensorSpec): ConfigDatatype => datatype === 'BYTES' ? 'TYPE_STRING' : `TYPE_${datatype}`

/** The dimensions Triton's configuration shows: without the batch dimension of a batching model. */
const dimsOf = (spec: TensorSpec, batching: boolean) => batching ? spec.shape.slice(1) : spec.shape

const isBatching = ({ maxBatchSize = 0 }: ModelDeclaration) => maxBatchSize > 0

/** The model metadata (`GET /v2/models/<m>`), listing the model's ready `versions`. */
export function modelMetadata (declaration: ModelDeclaration, versions: string[]): ModelMetadataResponse {
  const { name, platform = '', inputs, outputs } = declaration
  return { name, versions, platform, inputs, outputs }
}

/** Triton's model configuration of `declaration`; `versions` are every version of its name. */
export function modelConfig (declaration: ModelDeclaration, versions: string[]): ModelConfigResponse {
  const { name, platform = '', backend = '', maxBatchSize = 0, labelFilenames = {} } = declaration
  const batching = isBatching(declaration)
  return {
    name,
    platform,
    backend,
    runtime: '',
    version_policy: { specific: { versions: versions.map(Number) } },
    max_batch_size: Math.min(maxBatchSize, INT32_MAX),
    input: declaration.inputs.map((spec) => ({
      name: spec.name,
      data_type: configDatatype(spec),
      format: 'FORMAT_NONE',
      dims: dimsOf(spec, batching),
      is_shape_tensor: false,
      allow_ragged_batch: false,
      optional: false,
      is_non_linear_format_io: false
    })),
    output: declaration.outputs.map((spec) => ({
      name: spec.name,
      data_type: configDatatype(spec),
      dims: dimsOf(spec, batching),
      label_filename: labelFilenames[spec.name] ?? '',
      is_shape_tensor: false,
      is_non_linear_format_io: false
    })),
    batch_input: [],
    batch_output: [],
    instance_group: [{
      name, kind: 'KIND_CPU', count: 1, gpus: [], secondary_devices: [], profile: [], passive: false, host_policy: ''
    }],
    default_model_filename: '',
    cc_model_filenames: {},
    metric_tags: {},
    parameters: {},
    model_warmup: [],
    model_transaction_policy: { decoupled: false },
    response_cache: { enable: false }
  }
}
