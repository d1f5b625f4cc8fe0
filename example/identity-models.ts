/**
 * Identity models: each OUTPUTi is INPUTi, of the same shape and datatype. Triton's QA calls many
 * of them, each built with its own name, datatype, dimensions and batching (qa/common/
 * gen_qa_identity_models.py's `<platform>_zero_<n>_<type>` repository, its identity backend's
 * `custom_zero_1_float32` and `identity_int32`, the Python backend's `string_identity`): here they
 * are one JavaScript model each, with the signature the QA's configuration gives it. Zero-sized
 * tensors (a dimension of 0) pass through as any other.
 */
import type { BytesElements, Datatype, InferRequest, TensorData } from '../lib/index'
import type { Model } from './model'

export interface IdentitySpec {
  name: string
  datatype: Datatype
  /** Each tensor's dimensions, without the batch dimension (Triton's `dims`). */
  dims: number[]
  /** Triton's `max_batch_size`: above 0, every tensor has a batch dimension first. */
  maxBatchSize: number
  /** How many INPUTi -> OUTPUTi pairs (default 1). */
  pairs?: number
  /** The outputs' dimensions, where they differ from the inputs' (default `dims`). */
  outputDims?: number[]
  /** Triton's `instance_group` count (default: no limit). */
  instanceCount?: number
  /** The platform the model reports (default `node`): `pytorch_libtorch` for the QA's libtorch
   * identities, whose clients name the tensors by it. */
  platform?: string
  /** The tensors' names before their index (default `INPUT` and `OUTPUT`; PyTorch's `INPUT__`, `OUTPUT__`). */
  inputPrefix?: string
  outputPrefix?: string
}

type TypedArray = Exclude<TensorData, Buffer[] | BytesElements>

const bytesOf = (array: TypedArray) => new Uint8Array(array.buffer, array.byteOffset, array.byteLength)

const shapeOf = (dims: number[], maxBatchSize: number) => maxBatchSize > 0 ? [-1, ...dims] : dims

/** Copies each requested OUTPUTi from INPUTi: every output's storage is taken before any is
 * written, so a refused output (a region too small) leaves every region as it was. */
function copyInputs (infer: InferRequest, pairs: number, inputPrefix: string, outputPrefix: string): void {
  const copies: Array<() => void> = []
  for (let index = 0; index < pairs; index++) {
    const outputName = `${outputPrefix}${index}`
    if (!infer.requestedOutputs.includes(outputName)) continue
    const { data, shape, datatype } = infer.input(`${inputPrefix}${index}`)
    if (datatype === 'BYTES') {
      const output = infer.output<Buffer[]>(outputName, shape)
      const elements = data as BytesElements
      copies.push(() => { for (let element = 0; element < output.length; element++) output[element] = elements.at(element) as Buffer })
    } else {
      const output = infer.output<TypedArray>(outputName, shape)
      copies.push(() => bytesOf(output).set(bytesOf(data as TypedArray)))
    }
  }
  for (const copy of copies) copy()
}

/** One identity model of `spec`'s signature. */
export function identityModel ({
  name, datatype, dims, maxBatchSize, pairs = 1, outputDims = dims, instanceCount, platform = 'node', inputPrefix = 'INPUT', outputPrefix = 'OUTPUT'
}: IdentitySpec): Model {
  const tensors = (prefix: string, tensorDims: number[]) =>
    Array.from({ length: pairs }, (_, index) => ({ name: `${prefix}${index}`, datatype, shape: shapeOf(tensorDims, maxBatchSize) }))
  return {
    signature: { name, versions: ['1'], platform, maxBatchSize, inputs: tensors(inputPrefix, dims), outputs: tensors(outputPrefix, outputDims) },
    execute: (infer) => copyInputs(infer, pairs, inputPrefix, outputPrefix),
    ...(instanceCount !== undefined && { settings: { instanceCount } })
  }
}

/** Triton's names for the QA's datatypes (numpy's): `onnx_zero_1_float32`, `onnx_zero_3_object`. */
const QA_TYPE_NAMES: Array<[string, Datatype, number[], number[]]> = [
  // name, datatype, dims with one pair, dims with three (gen_qa_identity_models.py's create_models calls)
  ['bool', 'BOOL', [-1], [-1]],
  ['float32', 'FP32', [-1], [-1]],
  ['float16', 'FP16', [-1, -1], [-1, -1]],
  ['object', 'BYTES', [-1], [-1, -1]]
]

/** The QA identity repository's ONNX models that L0_infer_zero and L0_http call, batching (8) and
 * not: `onnx_zero_<n>_<type>`, `onnx_nobatch_zero_<n>_<type>`. */
function qaZeroModels (): Model[] {
  return QA_TYPE_NAMES.flatMap(([typeName, datatype, oneDims, threeDims]) => [1, 3].flatMap((pairs) => [8, 0].map((maxBatchSize) =>
    identityModel({
      name: `onnx${maxBatchSize > 0 ? '' : '_nobatch'}_zero_${pairs}_${typeName}`,
      datatype,
      dims: pairs === 1 ? oneDims : threeDims,
      maxBatchSize,
      pairs
    }))))
}

/** The repository's libtorch identities (`libtorch_zero_<n>_<type>`, `libtorch_nobatch_zero_<n>_<type>`):
 * the QA generates them for the types PyTorch takes with the L0_infer_zero shapes, bool `[-1]` and
 * float32 `[-1]` (one pair or three). Platform `pytorch_libtorch`, as the QA's clients read it to
 * name the tensors `INPUT__<i>`, `OUTPUT__<i>`. */
function qaLibtorchZeroModels (): Model[] {
  const kinds: Array<[string, Datatype, number]> = [['bool', 'BOOL', 1], ['float32', 'FP32', 1], ['float32', 'FP32', 3]]
  return kinds.flatMap(([typeName, datatype, pairs]) => [8, 0].map((maxBatchSize) => identityModel({
    name: `libtorch${maxBatchSize > 0 ? '' : '_nobatch'}_zero_${pairs}_${typeName}`,
    datatype,
    dims: [-1],
    maxBatchSize,
    pairs,
    platform: 'pytorch_libtorch',
    inputPrefix: 'INPUT__',
    outputPrefix: 'OUTPUT__'
  })))
}

/** The identity backend's `nop_<TYPE>_-1` models the QA's zero ensembles chain (emu.create_nop_modelconfig):
 * INPUT0, INPUT1 to OUTPUT0, OUTPUT1, `[-1]`, batches of up to 1024. */
function qaNopModels (): Model[] {
  return (['BOOL', 'FP32'] as const).map((datatype) => identityModel({ name: `nop_TYPE_${datatype}_-1`, datatype, dims: [-1], maxBatchSize: 1024, pairs: 2 }))
}

/** Every identity model of the example. */
export function identityModels (): Model[] {
  return [
    ...qaZeroModels(),
    ...qaLibtorchZeroModels(),
    ...qaNopModels(),
    // L0_http's copy of onnx_zero_1_object whose input holds one element: its raw binary request.
    identityModel({ name: 'onnx_zero_1_object_1_element', datatype: 'BYTES', dims: [1], outputDims: [-1], maxBatchSize: 8 }),
    // Triton's simple_identity, and L0_http's copy of it in INT64.
    identityModel({ name: 'simple_identity', datatype: 'BYTES', dims: [-1], maxBatchSize: 8 }),
    identityModel({ name: 'simple_identity_int64', datatype: 'INT64', dims: [-1], maxBatchSize: 8 }),
    // The identity backend's QA models: memory_growth_test's, L0_grpc_state_cleanup's (one
    // instance, as the backend's default: its requests run one after another, each after the
    // execute_delay_ms that is the service's EXAMPLE_MODEL_DELAY_MS), L0_decoupled's ensembles' step.
    identityModel({ name: 'custom_identity_int32', datatype: 'INT32', dims: [-1], maxBatchSize: 8 }),
    identityModel({ name: 'custom_zero_1_float32', datatype: 'FP32', dims: [1], maxBatchSize: 1, instanceCount: 1 }),
    identityModel({ name: 'identity_int32', datatype: 'INT32', dims: [-1], maxBatchSize: 0 }),
    // L0_parameters' copy of its identity_fp32 in BYTES, for the classification test (the FP32 one is ONNX).
    identityModel({ name: 'identity_bytes', datatype: 'BYTES', dims: [-1], maxBatchSize: 64 }),
    // string_identity as L0_grpc configures it (dims [ -1 ]; L0_string_io's [ 8 ] requests fit
    // it); L0_parameters' identity.
    identityModel({ name: 'string_identity', datatype: 'BYTES', dims: [-1], maxBatchSize: 0 }),
    identityModel({ name: 'identity', datatype: 'FP32', dims: [1], maxBatchSize: 0 })
  ]
}
