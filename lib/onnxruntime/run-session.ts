/**
 * Runs an infer request on an ONNX Runtime session with no copy in Node: every input is an ORT
 * tensor over the request's own typed array (a view of the client's region, or of the body), and
 * every output whose shape follows from the inputs' is handed to ORT pre-allocated over the
 * output's storage (a view of the client's region when the request put it there), so ORT writes it
 * in place.
 */
import type { InferenceSession, Tensor as OrtTensor } from 'onnxruntime-node'
import type { BytesElements, Datatype, Tensor, TensorData } from '../../types/kserve'
import * as errors from '../errors'
import { bytesOf } from '../kserve/datatypes'
import type { InferRequest } from '../kserve/infer-request'
import { ortTypeOf } from './datatypes'
import { namedDims, shapeOf } from './output-shapes'
import { onnxRuntime } from './runtime'

type OrtData = OrtTensor['data']
type TypedArray = Exclude<TensorData, Buffer[] | BytesElements>
type TensorMetadata = InferenceSession.TensorValueMetadata

function ortType (tensor: string, datatype: Datatype): OrtTensor.Type {
  const type = ortTypeOf(datatype)
  if (type === undefined) throw errors.onnxDatatypeUnsupported(tensor, datatype)
  return type
}

/** FP16 travels as raw bytes; ORT reads it as 16-bit words, over the same memory where it can. */
function float16Words (bytes: Uint8Array): Uint16Array | undefined {
  return bytes.byteOffset % 2 === 0 ? new Uint16Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 2) : undefined
}

/** An input's elements as ORT takes them: the same memory, but for strings (ORT takes JS strings)
 * and FP16 at an odd offset. */
function inputData ({ datatype, data }: Tensor): OrtData {
  if (datatype === 'BYTES') return Array.from(data as BytesElements, String)
  if (datatype === 'FP16') return float16Words(data as Uint8Array) ?? new Uint16Array(Uint8Array.from(data as Uint8Array).buffer)
  return data as OrtData
}

/** The memory ORT may write an output into, or undefined where it cannot (strings, odd FP16). */
function fetchData (datatype: Datatype, storage: TensorData): OrtData | undefined {
  if (datatype === 'BYTES') return undefined
  if (datatype === 'FP16') return float16Words(storage as Uint8Array)
  return storage as OrtData
}

/**
 * An ORT tensor over `data`. For FP16, ORT for JavaScript moves the 16-bit words into a
 * Float16Array where the runtime has one (Node 24 on), and onnxruntime-node's binding reads no bytes
 * from a Float16Array (Node-API has no such type: ORT then refuses, "not enough space"); so an
 * FP16 tensor keeps the Uint16Array it was made with.
 */
function ortTensor (Tensor: typeof OrtTensor, type: OrtTensor.Type, data: OrtData, dims: readonly number[]): OrtTensor {
  const tensor = new Tensor(type, data as Float32Array, dims)
  if (type === 'float16') Object.defineProperty(tensor, 'data', { value: data, enumerable: true })
  return tensor
}

/** Copies an output ORT allocated into the request's storage for it. */
function store (infer: InferRequest, name: string, result: OrtTensor): void {
  const storage = infer.output(name, [...result.dims])
  if (Array.isArray(storage)) {
    (result.data as string[]).forEach((element, index) => { storage[index] = Buffer.from(element) })
  } else {
    bytesOf(storage as TypedArray).set(bytesOf(result.data as TypedArray))
  }
}

/**
 * Runs `infer` on `session` and fills its outputs; respond with `infer.respond(reply)` as for any
 * model. ORT's refusals (a shape it cannot take, a bad value) are 400s with its message.
 */
export async function runSession (session: InferenceSession, infer: InferRequest): Promise<void> {
  // First: without onnxruntime-node this throws the error that says to install it.
  const { Tensor } = onnxRuntime()
  const feeds: Record<string, OrtTensor> = {}
  for (const tensor of infer.inputs) {
    feeds[tensor.name] = ortTensor(Tensor, ortType(tensor.name, tensor.datatype), inputData(tensor), tensor.shape)
  }
  const sizes = namedDims(session.inputMetadata, infer)
  const fetches: Record<string, OrtTensor | null> = {}
  for (const name of infer.requestedOutputs) {
    const value = (session.outputMetadata as TensorMetadata[]).find((output) => output.name === name) as TensorMetadata
    const { datatype } = infer.model.outputs.find((output) => output.name === name) as { datatype: Datatype }
    const shape = shapeOf(value, sizes)
    const data = shape === undefined ? undefined : fetchData(datatype, infer.output(name, shape))
    fetches[name] = data === undefined ? null : ortTensor(Tensor, ortType(name, datatype), data, shape!)
  }
  let results: InferenceSession.ReturnType
  try {
    results = await session.run(feeds, fetches)
  } catch (error) {
    throw errors.onnxRunFailed((error as Error).message)
  }
  for (const [name, fetch] of Object.entries(fetches)) {
    if (fetch === null) store(infer, name, results[name] as OrtTensor)
  }
}
