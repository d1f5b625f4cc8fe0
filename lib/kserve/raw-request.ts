/**
 * Triton's raw request: a body with no JSON at all (`Inference-Header-Content-Length: 0` over
 * HTTP) is the data of the model's single input, its shape deduced from the model's, every output
 * sent as binary data. Read here as the request it stands for, whatever transport brought it.
 */
import type { InferRequestWire, ModelSignature, TensorSpec } from '../../types/kserve'
import * as errors from '../errors'
import { elementBytes } from './datatypes'

/** The request a raw body stands for, and the bytes its input reads. */
export interface RawRequest {
  request: InferRequestWire
  bytes: Buffer
}

/** The input's shape as Triton's core deduces it: the batch 1, and the variable dimension (one at
 * most) from the body's size; a size the shape cannot hold is refused later, as the byte size
 * mismatch. A BYTES input must be one element. */
function rawShape ({ name, datatype, shape }: TensorSpec, batching: boolean, byteLength: number): number[] {
  const dims = batching ? [1, ...shape.slice(1)] : [...shape]
  const variable = dims.flatMap((dim, index) => dim === -1 ? [index] : [])
  if (variable.length > 1) throw errors.rawRequestShape(name)
  const fixedElements = dims.reduce((count, dim) => dim === -1 ? count : count * dim, 1)
  const bytesPerElement = elementBytes(datatype)
  if (bytesPerElement === undefined) {
    if (variable.length > 0 || fixedElements !== 1) throw errors.rawRequestBytesShape(name)
  } else if (variable.length === 1) {
    dims[variable[0]] = fixedElements === 0 ? 0 : Math.floor(byteLength / fixedElements / bytesPerElement)
  }
  return dims
}

/**
 * The request `body` stands for, for `model`. A BYTES input is one element, the whole body: its
 * bytes are copied once behind their 4-byte length, and `charge` is given that copy first.
 */
export function rawInferRequest (model: ModelSignature, body: Buffer, charge: (bytes: number) => void): RawRequest {
  if (model.inputs.length !== 1) throw errors.rawRequestInputCount(model.inputs.length, model.name)
  const [input] = model.inputs
  const shape = rawShape(input, (model.maxBatchSize ?? 0) > 0, body.length)
  const bytes = input.datatype === 'BYTES' ? lengthPrefixed(body, charge) : body
  const request: InferRequestWire = {
    parameters: { binary_data_output: true },
    inputs: [{ name: input.name, datatype: input.datatype, shape, parameters: { binary_data_size: bytes.length } }]
  }
  return { request, bytes }
}

function lengthPrefixed (body: Buffer, charge: (bytes: number) => void): Buffer {
  charge(4 + body.length)
  const bytes = Buffer.allocUnsafe(4 + body.length)
  bytes.writeUInt32LE(body.length)
  body.copy(bytes, 4)
  return bytes
}
