/**
 * A request of Triton's generate extension (`POST .../generate`, `.../generate_stream`) as the
 * infer request it stands for, read as Triton's HTTP server reads it: each top-level key of the
 * JSON object that names an input of the model is that input (a value or a flat array of values,
 * shaped to the input), every other key is a request parameter, and the keys of the object under
 * `parameters` are read the same way. Transport-free: the HTTP face parses the body, the model
 * table runs the request.
 */
import type { Datatype, InferInputWire, InferRequestWire, ModelSignature, TensorParameters, TensorSpec } from '../../types/kserve'
import * as errors from '../errors'
import { elementBytes } from './datatypes'

/** The keys of a generate request whose value is an object read as a request of its own. */
const NESTED_KEYWORD = 'parameters'

/** The bytes a BYTES element takes besides its text: its length. */
const LENGTH_BYTES = 4

type JsonObject = Record<string, unknown>

const isObject = (value: unknown): value is JsonObject => typeof value === 'object' && value !== null && !Array.isArray(value)

interface JsonAccess {
  accepts: (value: unknown) => boolean
  /** TritonJson's words for a value it cannot read so. */
  accessed: string
}

const NUMBER: JsonAccess = { accepts: (value) => typeof value === 'number', accessed: 'non-number as double' }

/** How Triton's JSON reader reads an element, by datatype without its size (FP16 and BF16, which
 * JSON cannot carry, are refused once their elements are read). */
const ACCESS: Readonly<Record<string, JsonAccess>> = {
  BYTES: { accepts: (value) => typeof value === 'string', accessed: 'non-string as string' },
  BOOL: { accepts: (value) => typeof value === 'boolean', accessed: 'non-boolean as boolean' },
  UINT: { accepts: (value) => Number.isInteger(value) && (value as number) >= 0, accessed: 'non-unsigned-integer as unsigned-integer' },
  INT: { accepts: (value) => Number.isInteger(value), accessed: 'non-signed-integer as signed-integer' },
  FP: NUMBER,
  BF: NUMBER
}

const accessOf = (datatype: Datatype): JsonAccess => ACCESS[datatype.replace(/\d+$/, '')]

/** The bytes the elements take once typed: BYTES as Triton serializes them, the others at their size. */
function typedByteSize (datatype: Datatype, elements: unknown[]): number {
  const bytesPerElement = elementBytes(datatype)
  if (bytesPerElement !== undefined) return elements.length * bytesPerElement
  let byteSize = 0
  for (const element of elements) {
    if (typeof element !== 'string') throw errors.generateInputType('Unable to parse JSON bytes array', 'non-string as string')
    byteSize += LENGTH_BYTES + Buffer.byteLength(element)
  }
  return byteSize
}

/** The input's shape for `count` elements, as Triton pads a generate request's value: fixed
 * dimensions take their share, the innermost variable one the rest, any other variable one 1. */
function paddedShape (spec: TensorSpec, count: number): number[] {
  let left = count
  for (const dim of spec.shape) {
    if (dim === -1) continue
    // A dimension of 0 leaves NaN: refused too.
    if (left % dim !== 0) throw errors.generateInputShape(spec.name)
    left /= dim
  }
  const shape = [...spec.shape]
  for (let index = shape.length - 1; index >= 0; index--) {
    if (shape[index] === -1) {
      shape[index] = left
      left = 1
    }
  }
  if (left !== 1) throw errors.generateInputShape(spec.name)
  return shape
}

/** A generate request as it is read: its inputs, its parameters, and the bytes its inputs take. */
class GenerateReading {
  readonly inputs: InferInputWire[] = []
  readonly parameters: TensorParameters = {}
  #inputBytes = 0

  constructor (private readonly model: ModelSignature, private readonly maxInputBytes: number) {}

  /** Reads every key of `object`; `nested`: the keyword it is under, if any. */
  read (object: JsonObject, nested = false): void {
    for (const [key, value] of Object.entries(object)) {
      if (key === NESTED_KEYWORD && !nested) this.#readNested(key, value)
      else this.#readKey(key, value)
    }
  }

  #readNested (keyword: string, value: unknown): void {
    if (this.model.inputs.some(({ name }) => name === keyword)) throw errors.generateKeywordInput(keyword)
    if (!isObject(value)) throw errors.generateKeywordNotObject(keyword)
    try {
      this.read(value, true)
    } catch (error) {
      throw errors.generateKeywordInvalid(keyword, (error as Error).message)
    }
  }

  #readKey (key: string, value: unknown): void {
    const spec = this.model.inputs.find(({ name }) => name === key)
    if (spec !== undefined) {
      this.inputs.push(this.#input(spec, value))
      return
    }
    if (typeof value !== 'string' && typeof value !== 'number' && typeof value !== 'boolean') throw errors.invalidRequestParameter(key)
    this.parameters[key] = value
  }

  /** The input `value` stands for, checked in Triton's order: its typed size, its shape, its elements. */
  #input (spec: TensorSpec, value: unknown): InferInputWire {
    const elements = Array.isArray(value) ? value : [value]
    const byteSize = typedByteSize(spec.datatype, elements)
    if (byteSize + this.#inputBytes > this.maxInputBytes) {
      throw errors.generateInputTooLarge(this.#inputBytes, spec.name, byteSize, this.maxInputBytes)
    }
    this.#inputBytes += byteSize
    const shape = paddedShape(spec, elements.length)
    const { accepts, accessed } = accessOf(spec.datatype)
    if (!elements.every(accepts)) throw errors.generateInputType("Unable to parse 'data'", accessed)
    return { name: spec.name, datatype: spec.datatype, shape, data: elements }
  }
}

/**
 * The infer request a generate request `body` stands for, for `model`: its `id` (a string), its
 * inputs and its parameters. `maxInputBytes` (Triton's `--http-max-input-size`) bounds what the
 * inputs take once typed: a JSON number becomes up to 8 bytes. Throws Triton's INVALID_ARG errors.
 */
export function generateRequestWire (body: unknown, model: ModelSignature, maxInputBytes: number): InferRequestWire {
  if (!isObject(body)) throw errors.invalidInferRequest('the body must be a JSON object')
  const { id } = body
  if (id !== undefined && typeof id !== 'string') throw errors.unparsableRequestParameter('id', 'attempt to access JSON non-string as string')
  const reading = new GenerateReading(model, maxInputBytes)
  reading.read(body)
  // Outputs are sent as JSON, as the generate response carries them.
  delete reading.parameters.binary_data_output
  return { ...(id !== undefined && { id }), parameters: reading.parameters, inputs: reading.inputs }
}
