/**
 * Structural checks of an infer request's JSON (before any model or shared memory is involved),
 * and typed access to tensor parameters.
 */
import type { InferInputWire, InferOutputRequestWire, InferRequestWire, TensorParameters } from '../../types/kserve'
import * as errors from '../errors'
import { isDatatype } from './datatypes'

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value)

const isShape = (value: unknown): value is number[] =>
  Array.isArray(value) && value.every((dim) => Number.isSafeInteger(dim) && dim >= 0)

/** 2^64: JSON's unsigned integers are below it. */
const UINT64_END = 2 ** 64

/** A JSON shape, as Triton's HTTP server reads one: each dimension an unsigned 64-bit integer,
 * above 2^53 as JSON gives it to JavaScript (inexact); anything else fails its JSON reader. */
function checkJsonShape (value: unknown[]): asserts value is number[] {
  if (!value.every((dim) => Number.isInteger(dim) && (dim as number) >= 0 && (dim as number) < UINT64_END)) throw errors.shapeNotUnsigned()
}

/** Where a request comes from: an HTTP body's JSON, or a message (gRPC) whose shapes are integers already. */
export type WireSource = 'json' | 'message'

function checkParameters (value: unknown, owner: string): void {
  if (value !== undefined && !isObject(value)) throw errors.invalidInferRequest(`'parameters' of ${owner} must be an object`)
}

function checkInput (input: unknown, index: number, source: WireSource): asserts input is InferInputWire {
  if (!isObject(input) || typeof input.name !== 'string') {
    throw errors.invalidInferRequest(`input ${index} must be an object with a string 'name'`)
  }
  const owner = `input '${input.name}'`
  if (!isDatatype(input.datatype)) throw errors.invalidInferRequest(`'datatype' of ${owner} is not a KServe datatype`)
  if (source === 'json' && Array.isArray(input.shape)) checkJsonShape(input.shape)
  else if (!isShape(input.shape)) throw errors.invalidInferRequest(`'shape' of ${owner} must be an array of unsigned integers`)
  checkParameters(input.parameters, owner)
  if (input.data !== undefined && !Array.isArray(input.data)) throw errors.invalidInferRequest(`'data' of ${owner} must be an array`)
}

function checkOutput (output: unknown, index: number): asserts output is InferOutputRequestWire {
  if (!isObject(output) || typeof output.name !== 'string') {
    throw errors.invalidInferRequest(`output ${index} must be an object with a string 'name'`)
  }
  checkParameters(output.parameters, `output '${output.name}'`)
}

/** Returns the request if its structure is valid; throws a 400 naming the first problem (a JSON
 * shape dimension that is no unsigned integer: Triton's 500). */
export function checkInferRequest (request: unknown, source: WireSource = 'message'): InferRequestWire {
  if (!isObject(request)) throw errors.invalidInferRequest('the body must be a JSON object')
  if (!Array.isArray(request.inputs)) throw errors.invalidInferRequest("'inputs' must be an array")
  request.inputs.forEach((input, index) => checkInput(input, index, source))
  if (request.outputs !== undefined) {
    if (!Array.isArray(request.outputs)) throw errors.invalidInferRequest("'outputs' must be an array")
    request.outputs.forEach(checkOutput)
  }
  checkParameters(request.parameters, 'the request')
  if (request.id !== undefined && typeof request.id !== 'string') throw errors.invalidInferRequest("'id' must be a string")
  return request as unknown as InferRequestWire
}

/** A tensor's parameters, read with the type each one must have. */
export class Parameters {
  constructor (private readonly tensor: string, private readonly values: TensorParameters = {}) {}

  has (name: string): boolean {
    return this.values[name] !== undefined
  }

  string (name: string): string | undefined {
    const value = this.values[name]
    if (value !== undefined && typeof value !== 'string') throw errors.invalidTensorParameter(this.tensor, name, 'a string')
    return value
  }

  boolean (name: string): boolean | undefined {
    const value = this.values[name]
    if (value !== undefined && typeof value !== 'boolean') throw errors.invalidTensorParameter(this.tensor, name, 'a boolean')
    return value
  }

  /** An unsigned integer; above 2^53 it arrives inexact, and is returned so for overflow checks. */
  unsigned (name: string): number | undefined {
    const value = this.values[name]
    if (value !== undefined && !(Number.isInteger(value) && (value as number) >= 0)) {
      throw errors.invalidTensorParameter(this.tensor, name, 'an unsigned integer')
    }
    return value as number | undefined
  }
}
