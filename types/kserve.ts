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
  /** An input a request may leave out (Triton's `optional: true`); the model then runs without
   * it. Inputs only. Default false. */
  optional?: boolean
  /** An output's class labels, by index (the lines of Triton's `label_filename`): a classification
   * of the output (Triton's `classification` parameter) names each class it returns. Outputs only. */
  labels?: string[]
}

/** What the helpers check a request against: the KServe model metadata (`GET /v2/models/<m>`). */
export interface ModelSignature {
  name: string
  versions?: string[]
  platform?: string
  /**
   * As Triton's `max_batch_size`: above 0, the first dimension of every input is the batch, so all
   * inputs must agree on it, and it may be at most this (`Infinity`: any size). Absent or 0: no
   * batch dimension.
   */
  maxBatchSize?: number
  inputs: TensorSpec[]
  outputs: TensorSpec[]
}

/**
 * The elements of a BYTES input, read lazily from their serialized bytes: an offset per element,
 * and a Buffer (a view of the request's own bytes, zero-copy) only for an element asked for.
 */
export interface BytesElements extends Iterable<Buffer> {
  readonly length: number
  /** Element `index` (negative counts from the end), or undefined past either end. */
  at(index: number): Buffer | undefined
  /** The elements as serialized: per element a 4-byte little-endian length, then its bytes. */
  readonly serialized: Uint8Array
}

/** Element storage per datatype: a typed array over the tensor's bytes; for BYTES, `BytesElements`
 * in inputs and one Buffer per element in outputs. FP16 and BF16 have no JavaScript type: their
 * raw bytes (two per element) are given. */
export type TensorData =
  | Uint8Array | Int8Array | Uint16Array | Int16Array | Uint32Array | Int32Array
  | BigUint64Array | BigInt64Array | Float32Array | Float64Array | Buffer[] | BytesElements

export interface Tensor<Data extends TensorData = TensorData> {
  name: string
  datatype: Datatype
  shape: number[]
  data: Data
}

/** What one infer request may cost; each is checked before the work it bounds, answering 400. */
export interface InferLimits {
  /** Most elements of one BYTES tensor, input or output (default: none, as Triton). An input's
   * elements are bounded by its bytes anyway (4 an element at least), an output's by the in-flight
   * budget (8 bytes an element); a model whose work per element is large can bound it here. */
  maxBytesElements?: number
  /** Most characters of JSON tensor data in one response (default 268,435,456, half of the
   * longest string V8 makes). A larger output must be asked for as binary data or in shared memory. */
  maxJsonResponseChars?: number
  /** Most bytes of output tensors one response holds outside shared memory (default 67,108,864,
   * or the request's own binary data where that is more): binary outputs, outputs the request did
   * not ask for, scratch for outputs that overlap an input. Charged when a model asks for an
   * output's storage, before it is allocated; a larger output must be asked for in shared memory. */
  maxOutputBytes?: number
  /** A response whose client reads none of it for this long has its connection dropped
   * (milliseconds, default 30,000): a client that stops reading cannot hold the response's memory,
   * or its connection, forever. The request's leases end as soon as its response is built. */
  sendTimeoutMs?: number
}

/**
 * What the infer requests in flight of one process hold together: their bodies, decoded messages,
 * output storage and answers, over every transport. Each request charges its reservation before
 * it allocates, and gives everything back when its transport ends it. The registry keeps the one
 * budget of a service (`registry.inFlight`, sized by the plugin option `maxInFlightBytes`).
 */
export interface InFlightBudget {
  /** The most bytes all requests may hold at once. */
  readonly maxBytes: number
  /** What they hold now. */
  readonly heldBytes: number
  /** The most they held at once, since the budget was made. */
  readonly peakBytes: number
  /** A reservation for one request, holding nothing yet. */
  open(): InFlightReservation
}

export interface InFlightReservation {
  /** What this request holds now. */
  readonly bytes: number
  /** Charges `bytes` more, before they are allocated. Throws `ERR_SHM_SERVER_BUSY` (503 with
   * Retry-After, RESOURCE_EXHAUSTED) when the budget has not that much left, and
   * `ERR_SHM_IN_FLIGHT_TOO_LARGE` (400) when the request would need more than the whole budget. */
  charge(bytes: number): void
  /** Gives back everything charged: the request is over, and later charges count nothing. Again: nothing. */
  release(): void
}
