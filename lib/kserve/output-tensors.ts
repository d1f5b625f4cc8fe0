/**
 * Outputs of an infer request: where each requested output goes (shared memory, binary data or
 * JSON), the storage a model writes it into, and the response that lists them.
 */
import type { Lease, SystemSharedMemoryRegistry } from '../../types'
import type { InferRequestWire, ModelSignature, TensorData, TensorSpec } from '../../types/kserve'
import * as errors from '../errors'
import { jsonOfBytesTensor, serializedSize, writeBytesTensor } from './bytes-tensor'
import { bytesOf, elementBytes, elementCount, hasJsonForm, jsonOfTypedArray, newTypedArray, typedArrayOver } from './datatypes'
import { Parameters } from './infer-wire'

type FixedDatatype = Exclude<TensorSpec['datatype'], 'BYTES'>
type TypedArray = Exclude<TensorData, Buffer[]>

/** Where one requested output goes. */
export interface OutputPlan {
  spec: TensorSpec
  /** Set when the output goes to shared memory: the region part it is written into. */
  lease?: Lease
  /** Sent as binary data after the JSON header (when not in shared memory). */
  binary: boolean
}

export interface ProducedOutput {
  spec: TensorSpec
  shape: number[]
  data: TensorData
}

function planOutput (name: string, parameterValues: Parameters, model: ModelSignature, binaryByDefault: boolean,
  acquire: (region: string, offset: number, byteSize: number) => Lease): OutputPlan {
  const spec = model.outputs.find((output) => output.name === name)
  if (spec === undefined) throw errors.unexpectedOutput(name, model.name)
  const binaryData = parameterValues.boolean('binary_data')
  const region = parameterValues.string('shared_memory_region')
  if (region === undefined) return { spec, binary: (binaryData ?? binaryByDefault) || !hasJsonForm(spec.datatype) }
  if (binaryData === true) throw errors.outputBinaryAndSharedMemory()
  const byteSize = parameterValues.unsigned('shared_memory_byte_size')
  if (byteSize === undefined) throw errors.missingSharedMemoryByteSize(name)
  return { spec, binary: false, lease: acquire(region, parameterValues.unsigned('shared_memory_offset') ?? 0, byteSize) }
}

/** The outputs a request asks for (all of the model's when it names none, as `"outputs": []` does
 * for Triton too), in the order asked. */
export function planOutputs (request: InferRequestWire, model: ModelSignature, registry: SystemSharedMemoryRegistry,
  hold: (lease: Lease) => void): Map<string, OutputPlan> {
  const binaryByDefault = new Parameters('request', request.parameters).boolean('binary_data_output') ?? false
  const acquire = (region: string, offset: number, byteSize: number) => {
    const lease = registry.acquire(region, offset, byteSize)
    hold(lease)
    return lease
  }
  const requested = request.outputs !== undefined && request.outputs.length > 0
    ? request.outputs
    : model.outputs.map(({ name }) => ({ name, parameters: undefined }))
  const plans = new Map<string, OutputPlan>()
  for (const { name, parameters } of requested) {
    plans.set(name, planOutput(name, new Parameters(name, parameters), model, binaryByDefault, acquire))
  }
  return plans
}

/** Storage for an output: a view of its shared memory (written in place) or a new array. */
export function outputStorage (spec: TensorSpec, shape: number[], plan: OutputPlan | undefined): TensorData {
  const count = elementCount(shape)
  const bytesPerElement = elementBytes(spec.datatype)
  if (bytesPerElement === undefined) return new Array<Buffer>(count).fill(Buffer.alloc(0))
  const datatype = spec.datatype as FixedDatatype
  if (plan?.lease === undefined) return newTypedArray(datatype, count)
  const required = count * bytesPerElement
  if (plan.lease.byteSize < required) throw errors.outputTooSmall(spec.name, plan.lease.byteSize, required)
  return typedArrayOver(datatype, plan.lease.buffer.subarray(0, required))
}

/** Puts an output's bytes in its region: BYTES are serialized now; an array that could not be a
 * view (unaligned offset) is copied; a view written in place needs nothing. */
function storeInSharedMemory ({ spec, data }: ProducedOutput, lease: Lease): void {
  if (spec.datatype === 'BYTES') {
    const elements = data as Buffer[]
    const required = serializedSize(elements)
    if (lease.byteSize < required) throw errors.outputTooSmall(spec.name, lease.byteSize, required)
    return writeBytesTensor(elements, lease.buffer)
  }
  const typed = data as TypedArray
  if (typed.buffer !== lease.buffer.buffer) lease.buffer.set(bytesOf(typed))
}

function binaryOf ({ spec, data }: ProducedOutput): Uint8Array {
  if (spec.datatype !== 'BYTES') return bytesOf(data as TypedArray)
  const elements = data as Buffer[]
  const bytes = Buffer.allocUnsafe(serializedSize(elements))
  writeBytesTensor(elements, bytes)
  return bytes
}

const jsonOf = ({ spec, data }: ProducedOutput): string => spec.datatype === 'BYTES'
  ? jsonOfBytesTensor(data as Buffer[])
  : jsonOfTypedArray(spec.datatype, data as TypedArray)

export interface EncodedResponse {
  /** The JSON header (the whole body when no output is binary). */
  header: string
  /** Binary output data, in the order of the header's outputs. */
  binary: Uint8Array[]
}

/** The response listing each planned output; shared-memory outputs are stored in their regions. */
export function encodeResponse (head: { model_name: string, id?: string }, plans: Map<string, OutputPlan>,
  produced: Map<string, ProducedOutput>): EncodedResponse {
  const entries: string[] = []
  const binary: Uint8Array[] = []
  for (const [name, plan] of plans) {
    const output = produced.get(name)
    if (output === undefined) throw new Error(`the model did not produce output '${name}'`)
    const fields = `"name":${JSON.stringify(name)},"datatype":"${plan.spec.datatype}","shape":${JSON.stringify(output.shape)}`
    if (plan.lease !== undefined) {
      storeInSharedMemory(output, plan.lease)
      entries.push(`{${fields}}`)
    } else if (plan.binary) {
      const bytes = binaryOf(output)
      binary.push(bytes)
      entries.push(`{${fields},"parameters":{"binary_data_size":${bytes.byteLength}}}`)
    } else {
      entries.push(`{${fields},"data":${jsonOf(output)}}`)
    }
  }
  const id = head.id === undefined ? '' : `,"id":${JSON.stringify(head.id)}`
  return { header: `{"model_name":${JSON.stringify(head.model_name)}${id},"outputs":[${entries.join(',')}]}`, binary }
}
