/**
 * Outputs of an infer request: where each requested output goes (shared memory, binary data or
 * JSON), the storage a model writes it into, and the response that lists them.
 */
import type { Lease, SystemSharedMemoryRegistry } from '../../types'
import type { BytesElements, InferLimits, InferOutputRequestWire, InferRequestWire, ModelSignature, TensorData, TensorSpec } from '../../types/kserve'
import * as errors from '../errors'
import { jsonOfBytesTensor, serializedSize, writeBytesTensor } from './bytes-tensor'
import { checkClassifiable, checkClassificationSize, classify } from './classification'
import {
  bytesOf, elementBytes, exactElementCount, hasJsonForm, jsonElementsOf, newTypedArray, typedArrayOver
} from './datatypes'
import { Parameters } from './infer-wire'

type FixedDatatype = Exclude<TensorSpec['datatype'], 'BYTES'>
type TypedArray = Exclude<TensorData, Buffer[] | BytesElements>

/** Where one requested output goes. */
export interface OutputPlan {
  spec: TensorSpec
  /** Set when the output goes to shared memory: the region part it is written into. */
  lease?: Lease
  /** The lease overlaps an input's bytes: the model writes into scratch storage, copied in after it
   * ran, so it computes from the inputs as they were (as Triton does). */
  aliased: boolean
  /** Sent as binary data after the JSON header (when not in shared memory). */
  binary: boolean
  /** Asked for as a classification (Triton's `classification` parameter): its top this many
   * classes, as BYTES, instead of its elements. */
  classCount?: number
  /** The model batches: the output's first dimension is the batch (each entry classified apart). */
  batched: boolean
}

export interface ProducedOutput {
  spec: TensorSpec
  shape: number[]
  data: TensorData
}

type Acquire = (region: string, offset: number, byteSize: number) => Lease

/** `binaryByDefault`: how an output the request does not list is sent (a listed one is JSON
 * unless it says `binary_data: true`). */
function planOutput (name: string, parameterValues: Parameters, model: ModelSignature, binaryByDefault: boolean,
  acquire: Acquire, inputLeases: Lease[]): OutputPlan {
  const spec = model.outputs.find((output) => output.name === name)
  if (spec === undefined) throw errors.unexpectedOutput(name, model.name)
  const batched = (model.maxBatchSize ?? 0) > 0
  const binaryData = parameterValues.boolean('binary_data')
  const region = parameterValues.string('shared_memory_region')
  // Triton's HTTP server reads a count of 0 as no classification.
  const classCount = parameterValues.unsigned('classification') || undefined
  if (region !== undefined && parameterValues.has('classification')) throw errors.outputSharedMemoryAndClassification()
  if (classCount !== undefined) {
    checkClassifiable(spec)
    return { spec, aliased: false, binary: binaryData ?? binaryByDefault, classCount, batched }
  }
  if (region === undefined) return { spec, aliased: false, binary: (binaryData ?? binaryByDefault) || !hasJsonForm(spec.datatype), batched }
  if (binaryData === true) throw errors.outputBinaryAndSharedMemory()
  const byteSize = parameterValues.unsigned('shared_memory_byte_size')
  if (byteSize === undefined) throw errors.missingSharedMemoryByteSize(name)
  const lease = acquire(region, parameterValues.unsigned('shared_memory_offset') ?? 0, byteSize)
  return { spec, binary: false, lease, aliased: inputLeases.some((input) => lease.overlaps(input)), batched }
}

/** The outputs a request asks for (all of the model's when it names none, as `"outputs": []` does
 * for Triton too), in the order asked. `inputLeases` are the shared memory the inputs are read from.
 * As Triton's, `binary_data_output` applies to the outputs the request does not list: a listed one
 * says `binary_data: true` itself, or is JSON. */
export function planOutputs (request: InferRequestWire, model: ModelSignature, registry: SystemSharedMemoryRegistry,
  hold: (lease: Lease) => void, inputLeases: Lease[]): Map<string, OutputPlan> {
  const listed = request.outputs !== undefined && request.outputs.length > 0
  const binaryByDefault = new Parameters('request', request.parameters).boolean('binary_data_output') ?? false
  const acquire: Acquire = (region, offset, byteSize) => {
    const lease = registry.acquire(region, offset, byteSize)
    hold(lease)
    return lease
  }
  const requested = listed
    ? request.outputs as InferOutputRequestWire[]
    : model.outputs.map(({ name }) => ({ name, parameters: undefined }))
  const plans = new Map<string, OutputPlan>()
  for (const { name, parameters } of requested) {
    if (plans.has(name)) throw errors.duplicateOutput(name)
    plans.set(name, planOutput(name, new Parameters(name, parameters), model, !listed && binaryByDefault, acquire, inputLeases))
  }
  return plans
}

/** True for an output the response carries as JSON `data` (one the request did not ask for is not sent). */
const sentAsJson = (plan: OutputPlan | undefined): boolean => plan !== undefined && plan.lease === undefined && !plan.binary

/** What the response carries of an output asked for as a classification: its top classes, as BYTES. */
function classified (output: ProducedOutput, plan: OutputPlan): ProducedOutput {
  const { shape, elements } = classify(output.spec.datatype, output.shape, output.data, plan.classCount as number, plan.batched, output.spec.labels)
  return { spec: { name: output.spec.name, datatype: 'BYTES', shape }, shape, data: elements }
}

/**
 * Storage for an output: a view of its shared memory (written in place) or a new array. Refuses,
 * before the model writes anything, what the response could not carry: a region too small, too
 * many BYTES elements, more binary data than `binary` has left (JSON is measured as it is written).
 */
export function outputStorage (spec: TensorSpec, shape: number[], plan: OutputPlan | undefined,
  limits: Required<InferLimits>, budgets: ResponseBudgets): TensorData {
  const count = exactElementCount(shape)
  const bytesPerElement = elementBytes(spec.datatype)
  if (bytesPerElement === undefined) {
    const maxElements = Math.min(limits.maxBytesElements, MAX_ARRAY_LENGTH)
    if (count > maxElements) throw errors.tooManyBytesElements(spec.name, count, maxElements)
    budgets.hold(POINTER_BYTES * Number(count))
    return new Array<Buffer>(Number(count)).fill(Buffer.alloc(0))
  }
  const datatype = spec.datatype as FixedDatatype
  const required = count * BigInt(bytesPerElement)
  if (plan?.classCount !== undefined) {
    // Classified when the response is made: the elements themselves are not sent.
    checkClassificationSize(shape, plan.batched)
    chargeBytes(budgets.binary, spec.name, required)
    return newTypedArray(datatype, Number(count))
  }
  if (plan?.lease === undefined) {
    // JSON's text is charged as it is written (`jsonOf`), its typed array now.
    if (sentAsJson(plan)) budgets.hold(Number(required))
    else chargeBytes(budgets.binary, spec.name, required)
    return newTypedArray(datatype, Number(count))
  }
  if (plan.lease.byteSize < required) throw errors.outputTooSmall(spec.name, plan.lease.byteSize, required)
  if (!plan.aliased) return typedArrayOver(datatype, plan.lease.buffer.subarray(0, Number(required)))
  chargeBytes(budgets.binary, spec.name, required)
  return newTypedArray(datatype, Number(count))
}

/** Charges an exact (possibly huge) byte count; no budget is above 2^53. */
const chargeBytes = (budget: ResponseBudget, output: string, bytes: bigint): void =>
  budget.charge(output, bytes > BigInt(budget.left) ? Infinity : Number(bytes))

/** A BYTES output's storage: one reference per element (the elements are the model's own). */
const POINTER_BYTES = 8

/** The most elements a JavaScript array holds: a BYTES output's storage is one. */
const MAX_ARRAY_LENGTH = 2 ** 32 - 1

/** What a response may still carry of one kind (characters of JSON, bytes of binary data):
 * charged before the storage it pays for is allocated, and passed on to `spend` (what all
 * requests in flight hold together), which may refuse it too. */
export class ResponseBudget {
  left: number

  constructor (readonly total: number, private readonly refuse: (output: string, total: number) => Error,
    private readonly spend: (amount: number) => void) {
    this.left = total
  }

  charge (output: string, amount: number): void {
    if (amount > this.left) throw this.refuse(output, this.total)
    this.spend(amount)
    this.left -= amount
  }
}

export interface ResponseBudgets {
  json: ResponseBudget
  /** Output bytes held outside shared memory: binary outputs, outputs the request did not ask
   * for, scratch for outputs that overlap an input. */
  binary: ResponseBudget
  /** Charges memory the response holds that neither counts: the typed arrays JSON outputs are
   * computed in, BYTES outputs' element arrays. */
  hold(bytes: number): void
}

/** The budgets of one response; `hold` is the request's share of what all requests in flight
 * may hold (its reservation's charge), which every charge goes to as well, with the `copies` of
 * the output's bytes its transport's answer will make. */
export function responseBudgets (limits: Required<InferLimits>, ownBytes: number, hold: (bytes: number) => void,
  copies = 0): ResponseBudgets {
  const answered = (amount: number) => hold(amount * (1 + copies))
  return {
    json: new ResponseBudget(limits.maxJsonResponseChars, errors.jsonResponseTooLarge, answered),
    // A request may always have back as many bytes as it sent.
    binary: new ResponseBudget(Math.max(limits.maxOutputBytes, ownBytes), errors.outputTooLarge, answered),
    hold
  }
}

/** Refuses a BYTES output its region cannot hold; fixed-size outputs were checked for storage. */
function checkFits ({ spec, data }: ProducedOutput, lease: Lease): void {
  if (spec.datatype !== 'BYTES') return
  const required = serializedSize(data as Buffer[])
  if (lease.byteSize < required) throw errors.outputTooSmall(spec.name, lease.byteSize, required)
}

/** Puts an output's bytes in its region: BYTES are serialized now (through scratch memory when the
 * region overlaps an input, whose elements the output may still point at); an array that is not a
 * view of the region (scratch, or an unaligned offset) is copied; a view written in place needs nothing. */
function storeInSharedMemory ({ spec, data }: ProducedOutput, { lease, aliased }: OutputPlan): void {
  const target = (lease as Lease).buffer
  if (spec.datatype === 'BYTES') {
    const elements = data as Buffer[]
    if (!aliased) return writeBytesTensor(elements, target)
    const scratch = Buffer.allocUnsafe(serializedSize(elements))
    writeBytesTensor(elements, scratch)
    return target.set(scratch)
  }
  const typed = data as TypedArray
  if (typed.buffer !== target.buffer) target.set(bytesOf(typed))
}

/** The output's bytes as binary data: a fixed-size output's own storage (charged when it was
 * given), BYTES serialized now, charged first. */
function binaryOf ({ spec, data }: ProducedOutput, budget: ResponseBudget): Uint8Array {
  if (spec.datatype !== 'BYTES') return bytesOf(data as TypedArray)
  const elements = data as Buffer[]
  const byteSize = serializedSize(elements)
  budget.charge(spec.name, byteSize)
  const bytes = Buffer.allocUnsafe(byteSize)
  writeBytesTensor(elements, bytes)
  return bytes
}

/** Elements written to JSON at a time: what the text holds beyond its charge is one slice's. */
const JSON_SLICE_ELEMENTS = 65_536

/** JSON of an output's elements, charged as it is written: a response holds its text, not the
 * worst case of its elements (an FP32 zero takes two characters, a float as a double up to 25). */
function jsonOf ({ spec, data }: ProducedOutput, json: ResponseBudget): string {
  if (spec.datatype !== 'BYTES') return jsonOfFixedSize(spec.name, spec.datatype, data as TypedArray, json)
  const text = jsonOfBytesTensor(spec.name, data as Buffer[], json.left)
  json.charge(spec.name, text?.length ?? Infinity)
  return text as string
}

function jsonOfFixedSize (name: string, datatype: FixedDatatype, data: TypedArray, json: ResponseBudget): string {
  json.charge(name, 2) // the brackets
  const slices: string[] = []
  for (let start = 0; start < data.length; start += JSON_SLICE_ELEMENTS) {
    const text = jsonElementsOf(datatype, data.subarray(start, start + JSON_SLICE_ELEMENTS))
    json.charge(name, text.length + (slices.length > 0 ? 1 : 0)) // with the comma before it
    slices.push(text)
  }
  return `[${slices.join(',')}]`
}

/** One output of a response as every transport lists it: its bytes unless in shared memory. */
export interface EncodedOutput {
  name: string
  datatype: TensorSpec['datatype']
  shape: number[]
  /** Set for a binary output; undefined for one in shared memory or sent as JSON. */
  binary?: Uint8Array
}

export interface EncodedResponse {
  /** The JSON header (the whole body when no output is binary). */
  header: string
  /** Binary output data, in the order of the header's outputs. */
  binary: Uint8Array[]
  /** Every output, in the order of the header's. */
  outputs: EncodedOutput[]
}

/** Who answers: the model, and the request's id when it had one. */
export interface ResponseHead {
  id?: string
  model_name: string
  /** The version that ran, when known. */
  model_version?: string
}

/** The response's first fields, in Triton's order. */
function headerFields ({ id, model_name: model, model_version: version }: ResponseHead): string {
  const named = `"model_name":${JSON.stringify(model)}`
  const identified = id === undefined ? named : `"id":${JSON.stringify(id)},${named}`
  return version === undefined ? identified : `${identified},"model_version":${JSON.stringify(version)}`
}

/**
 * The response listing each planned output; shared-memory outputs are stored in their regions.
 * Everything that can refuse the request is done before the first byte is stored: a refused
 * request changes nothing in any region.
 */
export function encodeResponse (head: ResponseHead, plans: Map<string, OutputPlan>,
  produced: Map<string, ProducedOutput>, budgets: ResponseBudgets): EncodedResponse {
  const planned = [...plans.values()]
  const stored = planned.map((plan) => storedOutput(plan, produced))
  const binary: Uint8Array[] = []
  const outputs: EncodedOutput[] = []
  let entries = ''
  for (let index = 0; index < planned.length; index++) {
    const plan = planned[index]
    const output = stored[index]
    const listed: EncodedOutput = { name: plan.spec.name, datatype: output.spec.datatype, shape: output.shape }
    outputs.push(listed)
    const fields = `"name":${JSON.stringify(listed.name)},"datatype":"${listed.datatype}","shape":[${listed.shape.join(',')}]`
    entries += index === 0 ? '{' : ',{'
    if (plan.lease !== undefined) entries += `${fields}}`
    else if (!plan.binary) entries += `${fields},"data":${jsonOf(output, budgets.json)}}`
    else {
      listed.binary = binaryOf(output, budgets.binary)
      binary.push(listed.binary)
      entries += `${fields},"parameters":{"binary_data_size":${listed.binary.byteLength}}}`
    }
  }
  for (let index = 0; index < planned.length; index++) {
    if (planned[index].lease !== undefined) storeInSharedMemory(stored[index], planned[index])
  }
  return { header: `{${headerFields(head)},"outputs":[${entries}]}`, binary, outputs }
}

/** What the model stored for a planned output, as the response carries it (classified, if asked);
 * refused if it stored nothing, or more BYTES than the output's region holds. */
function storedOutput (plan: OutputPlan, produced: Map<string, ProducedOutput>): ProducedOutput {
  const stored = produced.get(plan.spec.name)
  if (stored === undefined) throw errors.outputNotProduced(plan.spec.name)
  if (plan.lease !== undefined) checkFits(stored, plan.lease)
  return plan.classCount === undefined ? stored : classified(stored, plan)
}

/**
 * The response of Triton's generate extension: `id` (when not empty), `model_name`,
 * `model_version` and each output the model stored, by name, its elements as JSON (one element as
 * itself, any other count as a flat array), every key in Triton's order (sorted). An output named
 * as one of the first three is left out, as Triton leaves it.
 */
export function encodeGenerateResponse (head: Required<ResponseHead>, produced: Map<string, ProducedOutput>, budgets: ResponseBudgets): string {
  const fields = new Map<string, string>()
  if (head.id !== '') fields.set('id', JSON.stringify(head.id))
  fields.set('model_name', JSON.stringify(head.model_name))
  fields.set('model_version', JSON.stringify(head.model_version))
  for (const [name, output] of produced) {
    if (fields.has(name)) continue
    const json = jsonOf(output, budgets.json)
    fields.set(name, exactElementCount(output.shape) === 1n ? json.slice(1, -1) : json)
  }
  return `{${[...fields.keys()].sort().map((key) => `${JSON.stringify(key)}:${fields.get(key) as string}`).join(',')}}`
}
