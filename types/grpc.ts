/**
 * KServe V2 over gRPC (`inference.GRPCInferenceService`, fastify-triton-shm/grpc): the messages
 * this package serves, as grpc-js hands them to handlers when the protocol is loaded with
 * `GRPC_LOADER_OPTIONS` (field names as in the .proto, 64-bit integers as decimal strings, every
 * field present with its default, `bytes` as Buffers). Messages sent may give 64-bit integers as
 * numbers. ModelInferRequest is the package's own decoder's (`inferenceService()`): its shape
 * dimensions are numbers and its typed contents typed arrays, never an object per element.
 */
import type { RestrictionGroup } from './index'
import type { BytesElements } from './kserve'

export type ParameterChoice = 'bool_param' | 'int64_param' | 'string_param' | 'double_param' | 'uint64_param'

/** A request or tensor parameter: one of its fields is set, named by `parameter_choice`. */
export interface InferParameter {
  parameter_choice?: ParameterChoice
  bool_param?: boolean
  int64_param?: string | number
  string_param?: string
  double_param?: number
  uint64_param?: string | number
}

export type InferParameters = Record<string, InferParameter>

/** A tensor's elements by type (the typed alternative to `raw_input_contents`): as the package's
 * decoder gives them (typed arrays, BOOL as 0 and 1, BYTES serialized), or as proto-loader does
 * (arrays of values, 64-bit integers as decimal strings). */
export interface InferTensorContents {
  bool_contents: boolean[] | Uint8Array
  /** INT8, INT16, INT32. */
  int_contents: number[] | Int32Array
  int64_contents: Array<string | number> | BigInt64Array
  /** UINT8, UINT16, UINT32. */
  uint_contents: number[] | Uint32Array
  uint64_contents: Array<string | number> | BigUint64Array
  fp32_contents: number[] | Float32Array
  fp64_contents: number[] | Float64Array
  bytes_contents: Buffer[] | BytesElements
}

export interface InferInputTensor {
  name: string
  datatype: string
  /** Numbers from the package's decoder (exact below 2^53), decimal strings from proto-loader's. */
  shape: Array<number | string>
  parameters: InferParameters
  contents: InferTensorContents | null
}

export interface InferRequestedOutputTensor {
  name: string
  parameters: InferParameters
}

export interface ModelInferRequest {
  model_name: string
  model_version: string
  id: string
  parameters: InferParameters
  inputs: InferInputTensor[]
  outputs: InferRequestedOutputTensor[]
  /** The bytes of each input not in shared memory and without `contents`, in the order of `inputs`. */
  raw_input_contents: Buffer[]
}

export interface InferOutputTensor {
  name: string
  datatype: string
  shape: number[]
}

export interface ModelInferResponse {
  model_name: string
  model_version: string
  id: string
  outputs: InferOutputTensor[]
  /** Aligned with `outputs`: each output's bytes, empty for an output written into shared memory. */
  raw_output_contents: Uint8Array[]
}

/** What `ModelStreamInfer` sends per response: `error_message` empty when the request succeeded. */
export interface ModelStreamInferResponse {
  error_message: string
  infer_response: Partial<ModelInferResponse> & { parameters?: InferParameters }
}

export interface RegionStatusMessage {
  name: string
  key: string
  offset: number | string
  byte_size: number | string
}

export interface SystemSharedMemoryStatusRequest { name: string }
export interface SystemSharedMemoryStatusResponse { regions: Record<string, RegionStatusMessage> }
export interface SystemSharedMemoryRegisterRequest { name: string, key: string, offset: string, byte_size: string }
export interface SystemSharedMemoryUnregisterRequest { name: string }
export interface CudaSharedMemoryStatusRequest { name: string }
export interface CudaSharedMemoryStatusResponse { regions: Record<string, { name: string, device_id: number | string, byte_size: number | string }> }
export interface CudaSharedMemoryRegisterRequest { name: string, raw_handle: Buffer, device_id: string, byte_size: string }
export interface CudaSharedMemoryUnregisterRequest { name: string }

/** Options of the shared memory service over gRPC, as the plugin's of the same names. */
export interface SharedMemoryServiceOptions {
  /** When false, register and both system unregisters answer UNIMPLEMENTED (status still works). Default true. */
  allowClientShm?: boolean
  /** Serve the shared memory RPCs only to calls whose metadata carries this header with this
   * value (else UNAVAILABLE, as Triton's `--grpc-restricted-protocol`). */
  restrictedApi?: { header: string, value: string }
  /** Triton's `--grpc-restricted-protocol`: the RPCs of each group's categories served only to
   * calls whose metadata carries its key with its value (else UNAVAILABLE). Triton's clients send
   * `triton-grpc-protocol-<key>`: give that whole name. A category in two groups, or an unknown
   * one, is refused with Triton's text (`restrictedApi` is the `shared-memory` category). */
  restrictedProtocols?: RestrictionGroup[]
  /** Whose memory a client may register: `peer` (default), `local` or `any`, as the plugin's
   * option of the same name. */
  clientShmAccess?: 'peer' | 'local' | 'any'
}

/** A model repository request parameter: one of its fields is set, named by `parameter_choice`. */
export interface ModelRepositoryParameter {
  parameter_choice?: 'bool_param' | 'int64_param' | 'string_param' | 'bytes_param'
  bool_param?: boolean
  int64_param?: string | number
  string_param?: string
  bytes_param?: Buffer
}

/** A logging setting (`LogSettingsRequest`'s and `LogSettingsResponse`'s `SettingValue`). */
export interface LogSettingValue {
  parameter_choice?: 'bool_param' | 'uint32_param' | 'string_param'
  bool_param?: boolean
  uint32_param?: number
  string_param?: string
}

/** `LogSettings`: the settings to change, by Triton's names (`log_info`, ...); the answer has every one. */
export interface LogSettingsRequest { settings: Record<string, LogSettingValue> }
export interface LogSettingsResponse { settings: Record<string, LogSettingValue> }

export interface RepositoryIndexRequest { repository_name: string, ready: boolean }
export interface RepositoryIndexResponse { models: Array<{ name: string, version: string, state: string, reason: string }> }
export interface RepositoryModelLoadRequest { repository_name: string, model_name: string, parameters: Record<string, ModelRepositoryParameter> }
export interface RepositoryModelUnloadRequest { repository_name: string, model_name: string, parameters: Record<string, ModelRepositoryParameter> }

/** Triton's trace extension (`TraceSetting`): each setting's values as strings; none clears it. */
export interface TraceSettingRequest { settings: Record<string, { value: string[] }>, model_name: string }
export interface TraceSettingResponse { settings: Record<string, { value: string[] }> }
