/**
 * KServe V2 inference protocol: the wire shapes of an infer request and response, the model
 * signature the helpers validate against, and the tensors they hand to a model.
 */

export type Datatype =
  | 'BOOL' | 'UINT8' | 'UINT16' | 'UINT32' | 'UINT64'
  | 'INT8' | 'INT16' | 'INT32' | 'INT64'
  | 'FP16' | 'BF16' | 'FP32' | 'FP64' | 'BYTES'

export type TensorParameters = Record<string, string | number | boolean>

/** One input of an infer request. Its data comes from exactly one of `data`,
 * `parameters.binary_data_size` (binary body) or `parameters.shared_memory_region`. */
export interface InferInputWire {
  name: string
  shape: number[]
  datatype: string
  parameters?: TensorParameters
  data?: unknown[]
}

export interface InferOutputRequestWire {
  name: string
  parameters?: TensorParameters
}

export interface InferRequestWire {
  id?: string
  parameters?: TensorParameters
  inputs: InferInputWire[]
  outputs?: InferOutputRequestWire[]
}

export interface InferOutputWire {
  name: string
  datatype: Datatype
  shape: number[]
  parameters?: TensorParameters
  data?: unknown[]
}

export interface InferResponseWire {
  model_name: string
  model_version?: string
  id?: string
  outputs: InferOutputWire[]
}

/** A tensor of a model's signature; -1 in `shape` matches any size. */
export interface TensorSpec {
  name: string
  datatype: Datatype
  shape: number[]
}

/** What the helpers check a request against: the KServe model metadata (`GET /v2/models/<m>`). */
export interface ModelSignature {
  name: string
  versions?: string[]
  platform?: string
  inputs: TensorSpec[]
  outputs: TensorSpec[]
}

/** Element storage per datatype: a typed array over the tensor's bytes, or one Buffer per element
 * for BYTES. FP16 and BF16 have no JavaScript type: their raw bytes (two per element) are given. */
export type TensorData =
  | Uint8Array | Int8Array | Uint16Array | Int16Array | Uint32Array | Int32Array
  | BigUint64Array | BigInt64Array | Float32Array | Float64Array | Buffer[]

export interface Tensor<Data extends TensorData = TensorData> {
  name: string
  datatype: Datatype
  shape: number[]
  data: Data
}
