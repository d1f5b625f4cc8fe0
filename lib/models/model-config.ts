/**
 * What a declaration says, as Triton says it: the KServe model metadata and Triton's model
 * configuration (the fields perf_analyzer and Triton's clients read, enums as strings, int64
 * values as JSON numbers).
 */
import type { TensorSpec } from '../../types/kserve'
import type { EnsembleScheduling } from '../../types/ensembles'
import type { ConfigDatatype, ModelConfigResponse, ModelEnsemblingConfig, ModelMetadataResponse, ModelSequenceBatchingConfig } from '../../types/models'
import type { SequenceBatching } from '../../types/sequences'
import type { ModelDeclaration } from './declaration'

/** Triton's `max_sequence_idle_microseconds` when a configuration gives none. */
export const DEFAULT_SEQUENCE_IDLE_MICROSECONDS = 1_000_000

/** Triton's `max_batch_size` is an int32: a model that takes any batch shows the largest. */
const INT32_MAX = 2 ** 31 - 1

const configDatatype = ({ datatype }: Pick<TensorSpec, 'datatype'>): ConfigDatatype => datatype === 'BYTES' ? 'TYPE_STRING' : `TYPE_${datatype}`

/** Triton's `sequence_batching`, as it prints one whose strategy was left to its default (direct). */
function sequenceBatchingConfig ({ maxSequenceIdleMicroseconds, controlInputs = [] }: SequenceBatching): ModelSequenceBatchingConfig {
  return {
    direct: { max_queue_delay_microseconds: 0, minimum_slot_utilization: 0 },
    max_sequence_idle_microseconds: maxSequenceIdleMicroseconds ?? DEFAULT_SEQUENCE_IDLE_MICROSECONDS,
    control_input: controlInputs.map(({ name, kind, datatype, falseTrue = [0, 1] }) => {
      const flag = kind !== 'CONTROL_SEQUENCE_CORRID'
      return {
        name,
        control: [{
          kind,
          int32_false_true: flag && datatype === 'INT32' ? [...falseTrue] : [],
          fp32_false_true: flag && datatype === 'FP32' ? [...falseTrue] : [],
          bool_false_true: flag && datatype === 'BOOL' ? falseTrue.map(Boolean) : [],
          data_type: flag ? 'TYPE_INVALID' : configDatatype({ datatype })
        }]
      }
    }),
    state: [],
    iterative_sequence: false
  }
}

/** Triton's `ensemble_scheduling`: a step without a version runs the newest (-1). */
function ensemblingConfig ({ steps }: EnsembleScheduling): ModelEnsemblingConfig {
  return {
    step: steps.map(({ model, version, inputMap, outputMap }) => ({
      model_name: model,
      model_version: version === undefined ? -1 : Number(version),
      input_map: { ...inputMap },
      output_map: { ...outputMap },
      model_namespace: ''
    }))
  }
}

/** The dimensions Triton's configuration shows: without the batch dimension of a batching model. */
const dimsOf = (spec: TensorSpec, batching: boolean) => batching ? spec.shape.slice(1) : spec.shape

const isBatching = ({ maxBatchSize = 0 }: ModelDeclaration) => maxBatchSize > 0

/** A tensor as the model metadata lists it: its name, datatype and shape (not whether it is optional, nor its labels). */
const metadataOf = ({ name, datatype, shape }: TensorSpec): TensorSpec => ({ name, datatype, shape })

/** The model metadata (`GET /v2/models/<m>`), listing the model's ready `versions`. */
export function modelMetadata (declaration: ModelDeclaration, versions: string[]): ModelMetadataResponse {
  const { name, platform = '', inputs, outputs } = declaration
  return { name, versions, platform, inputs: inputs.map(metadataOf), outputs: outputs.map(metadataOf) }
}

/** Triton's model configuration of `declaration`; `versions` are every version of its name. */
export function modelConfig (declaration: ModelDeclaration, versions: string[]): ModelConfigResponse {
  const {
    name, platform = '', backend = '', maxBatchSize = 0, labelFilenames = {}, decoupled = false, sequenceBatching, ensembleScheduling, instanceCount = 1
  } = declaration
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
      optional: spec.optional ?? false,
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
    // Where Triton prints its scheduling choice.
    ...(sequenceBatching !== undefined && { sequence_batching: sequenceBatchingConfig(sequenceBatching) }),
    ...(ensembleScheduling !== undefined && { ensemble_scheduling: ensemblingConfig(ensembleScheduling) }),
    instance_group: [{
      name, kind: 'KIND_CPU', count: instanceCount, gpus: [], secondary_devices: [], profile: [], passive: false, host_policy: ''
    }],
    default_model_filename: '',
    cc_model_filenames: {},
    metric_tags: {},
    parameters: {},
    model_warmup: [],
    model_transaction_policy: { decoupled },
    response_cache: { enable: false }
  }
}
