/**
 * ModelInferRequest read from its protobuf bytes by the package itself, in two passes: the first
 * walks the message without allocating and says what its decoded form will take (refusing, before
 * anything is allocated, one that would take more than a small multiple of its own bytes); the
 * second decodes it, typed `contents` straight into typed arrays and `bytes_contents` into one
 * serialized buffer, never an object per element. (proto-loader makes a decimal string per int64
 * element: 128 Mi one-byte zeros, 127 KiB once compressed, took the heap.) Fields this package does
 * not know are skipped, as protobuf requires; the message otherwise has the shape proto-loader
 * gives it with `GRPC_LOADER_OPTIONS`.
 */
import type { InferInputTensor, InferParameter, InferParameters, InferRequestedOutputTensor, InferTensorContents, ModelInferRequest }
  from '../../types/grpc'
import * as errors from '../errors'
import { parseBytesTensor } from '../kserve/bytes-tensor'
import { DATATYPES } from '../kserve/datatypes'
import { SERVER_PARAMETERS } from '../kserve/request-parameters'
import { checkedDecodedCost, OBJECT_BYTES, stringBytes, VIEW_BYTES } from './decoded-cost'
import { TENSOR_PARAMETER_NAMES } from './infer-parameters'
import { KnownStrings } from './known-strings'
import { Cursor, DELIMITED, eachField as eachWireField, type Expected, FIXED32, FIXED64, VARINT, type Visit, wireTypes } from './protobuf-wire'

const MESSAGE = 'ModelInferRequest'

const malformed = (reason: string) => errors.malformedMessage(MESSAGE, reason)

/** The fields of a ModelInferRequest (or of a message in it) in `[start, end)`. */
const eachField = (bytes: Uint8Array, start: number, end: number, expected: Expected, visit: Visit) =>
  eachWireField(MESSAGE, bytes, start, end, expected, visit)

const STRING = wireTypes(DELIMITED)
const MESSAGE_FIELD = wireTypes(DELIMITED)
const REPEATED_VARINT = wireTypes(VARINT, DELIMITED)

const REQUEST: Expected = { 1: STRING, 2: STRING, 3: STRING, 4: MESSAGE_FIELD, 5: MESSAGE_FIELD, 6: MESSAGE_FIELD, 7: STRING }
const INPUT: Expected = { 1: STRING, 2: STRING, 3: REPEATED_VARINT, 4: MESSAGE_FIELD, 5: MESSAGE_FIELD }
const OUTPUT: Expected = { 1: STRING, 2: MESSAGE_FIELD }
const MAP_ENTRY: Expected = { 1: STRING, 2: MESSAGE_FIELD }
const PARAMETER: Expected = { 1: wireTypes(VARINT), 2: wireTypes(VARINT), 3: STRING, 4: wireTypes(FIXED64), 5: wireTypes(VARINT) }

/** `InferTensorContents`: its fields by number, with the wire type of one element and the bytes
 * an element takes decoded (int and uint count their conversion to a narrower datatype too). */
const CONTENTS = {
  1: { name: 'bool_contents', element: VARINT, bytes: 1 },
  2: { name: 'int_contents', element: VARINT, bytes: 8 },
  3: { name: 'int64_contents', element: VARINT, bytes: 8 },
  4: { name: 'uint_contents', element: VARINT, bytes: 8 },
  5: { name: 'uint64_contents', element: VARINT, bytes: 8 },
  6: { name: 'fp32_contents', element: FIXED32, bytes: 4 },
  7: { name: 'fp64_contents', element: FIXED64, bytes: 8 },
  8: { name: 'bytes_contents', element: DELIMITED, bytes: 0 }
} as const satisfies Record<number, { name: keyof InferTensorContents, element: number, bytes: number }>

type ContentsField = keyof typeof CONTENTS

const CONTENTS_WIRES: Expected = Object.fromEntries(Object.entries(CONTENTS).map(([field, { element }]) =>
  [field, element === DELIMITED ? wireTypes(DELIMITED) : wireTypes(element, DELIMITED)]))

/** A shape dimension: a number in the decoded array, and in its copy the request is read from. */
const DIMENSION_BYTES = 16
/** A BYTES element, serialized: its 4-byte length, and the 8-byte offset its input is read with. */
const BYTES_ELEMENT_OVERHEAD = 12

/** Elements of a repeated numeric field in `[start, end)`: packed, a count of its varints (or of
 * its fixed-size values); unpacked, one. */
function elementsIn (bytes: Uint8Array, wire: number, element: number, start: number, end: number): number {
  if (wire !== DELIMITED) return 1
  const length = end - start
  if (element === FIXED32 || element === FIXED64) {
    const size = element === FIXED32 ? 4 : 8
    if (length % size !== 0) throw malformed('a packed field does not hold whole elements')
    return length / size
  }
  let count = 0
  for (let index = start; index < end; index++) if (bytes[index] < 0x80) count++
  if (length > 0 && bytes[end - 1] >= 0x80) throw malformed('a packed varint runs past the end of its field')
  return count
}

// The first pass: what the decoded form takes

function parameterBytes (bytes: Uint8Array, start: number, end: number): number {
  let total = OBJECT_BYTES
  eachField(bytes, start, end, MAP_ENTRY, (field, _wire, from, to) => {
    if (field === 1) total += stringBytes(to - from)
    else {
      eachField(bytes, from, to, PARAMETER, (_choice, _wire, valueFrom, valueTo) => { total += stringBytes(valueTo - valueFrom) })
    }
  })
  return total
}

function contentsBytes (bytes: Uint8Array, start: number, end: number): number {
  let total = OBJECT_BYTES
  eachField(bytes, start, end, CONTENTS_WIRES, (field, wire, from, to) => {
    const { element, bytes: perElement } = CONTENTS[field as ContentsField]
    if (element === DELIMITED) total += BYTES_ELEMENT_OVERHEAD + to - from
    else total += perElement * elementsIn(bytes, wire, element, from, to)
  })
  return total
}

function inputBytes (bytes: Uint8Array, start: number, end: number): number {
  let total = OBJECT_BYTES
  eachField(bytes, start, end, INPUT, (field, wire, from, to) => {
    if (field === 3) total += DIMENSION_BYTES * elementsIn(bytes, wire, VARINT, from, to)
    else if (field === 4) total += parameterBytes(bytes, from, to)
    else if (field === 5) total += contentsBytes(bytes, from, to)
    else total += stringBytes(to - from)
  })
  return total
}

function outputBytes (bytes: Uint8Array, start: number, end: number): number {
  let total = OBJECT_BYTES
  eachField(bytes, start, end, OUTPUT, (field, _wire, from, to) => {
    total += field === 2 ? parameterBytes(bytes, from, to) : stringBytes(to - from)
  })
  return total
}

/** Bytes the decoded form of a ModelInferRequest takes besides the message itself (its
 * `raw_input_contents` are views of it). Throws `ERR_SHM_MALFORMED_MESSAGE` for bytes that are no
 * such message. Allocates nothing. */
export function decodedBytes (bytes: Uint8Array): number {
  let total = OBJECT_BYTES
  eachField(bytes, 0, bytes.length, REQUEST, (field, _wire, from, to) => {
    if (field === 4) total += parameterBytes(bytes, from, to)
    else if (field === 5) total += inputBytes(bytes, from, to)
    else if (field === 6) total += outputBytes(bytes, from, to)
    else if (field === 7) total += VIEW_BYTES
    else total += stringBytes(to - from)
  })
  return total
}

/** `decodedBytes`, refused with `ERR_SHM_MESSAGE_TOO_COSTLY` past what the listener allows a
 * message of its size (`allowedDecodedBytes`: less for one that arrived compressed). */
export const checkedDecodedBytes = (bytes: Uint8Array, compressed = false): number =>
  checkedDecodedCost(MESSAGE, bytes.length, decodedBytes(bytes), compressed)

// The second pass: the decoded form

const TWO_32 = 2 ** 32

/** The parameter names requests carry (the tensors', the binary data extension's, the server's)
 * and the datatypes: recognised in their bytes, any other string is decoded. */
const KNOWN = new KnownStrings([...TENSOR_PARAMETER_NAMES, 'binary_data', 'binary_data_size', ...SERVER_PARAMETERS, ...DATATYPES])

/** The signed 64-bit integer of two words, as the nearest double (exact below 2^53). */
const signedNumber = (low: number, high: number): number => (high | 0) * TWO_32 + low

/** Above this high word, a 64-bit integer may be past 2^53, where doubles are no longer exact. */
const EXACT_HIGH_WORDS = 2 ** 21
/** The decimal text of a 64-bit integer, as protobufjs gives an int64 (a BigInt only where a
 * double would not be exact: offsets and sizes never are). */
const unsignedText = (low: number, high: number): string =>
  high < EXACT_HIGH_WORDS ? String(high * TWO_32 + low) : ((BigInt(high) << 32n) | BigInt(low)).toString()
const signedText = (low: number, high: number): string =>
  high < EXACT_HIGH_WORDS ? String(high * TWO_32 + low) : BigInt.asIntN(64, (BigInt(high) << 32n) | BigInt(low)).toString()

function parameterOf (buffer: Buffer, start: number, end: number): InferParameter {
  let parameter: InferParameter = {}
  // A oneof sent twice: the last wins.
  eachField(buffer, start, end, PARAMETER, (choice, _wire, from, to) => { parameter = choiceOf(buffer, choice, from, to) })
  return parameter
}

/** The parameter of oneof field `choice`, its value at `from` to `to`. */
function choiceOf (buffer: Buffer, choice: number, from: number, to: number): InferParameter {
  if (choice === 3) return { parameter_choice: 'string_param', string_param: buffer.toString('utf8', from, to) }
  if (choice === 4) return { parameter_choice: 'double_param', double_param: buffer.readDoubleLE(from) }
  const cursor = new Cursor(buffer, from, to, MESSAGE)
  cursor.varint()
  if (choice === 1) return { parameter_choice: 'bool_param', bool_param: cursor.low !== 0 || cursor.high !== 0 }
  if (choice === 2) return { parameter_choice: 'int64_param', int64_param: signedText(cursor.low, cursor.high) }
  return { parameter_choice: 'uint64_param', uint64_param: unsignedText(cursor.low, cursor.high) }
}

/** Adds a map entry to `parameters` (a key sent twice: the last wins, as protobuf says). */
function addParameter (parameters: InferParameters, buffer: Buffer, start: number, end: number): void {
  let key = ''
  let value: InferParameter = {}
  eachField(buffer, start, end, MAP_ENTRY, (field, _wire, from, to) => {
    if (field === 1) key = KNOWN.read(buffer, from, to)
    else value = parameterOf(buffer, from, to)
  })
  parameters[key] = value
}

const ELEMENT_ARRAYS = {
  1: Uint8Array, 2: Int32Array, 3: BigInt64Array, 4: Uint32Array, 5: BigUint64Array, 6: Float32Array, 7: Float64Array
} as const

type NumericField = keyof typeof ELEMENT_ARRAYS
type NumericArray = InstanceType<typeof ELEMENT_ARRAYS[NumericField]>

/** Fills a typed array element by element: varints through its 32-bit words (64-bit ones as two,
 * little-endian, as every platform this package builds for), fixed-size values as their bytes. */
class Filler {
  #next = 0
  readonly #bytes: Uint8Array
  readonly #words: Uint32Array

  constructor (private readonly field: NumericField, array: NumericArray) {
    this.#bytes = new Uint8Array(array.buffer)
    this.#words = new Uint32Array(array.buffer, 0, array.byteLength >>> 2)
  }

  /** Reads the elements of `[cursor.position, end)` into the array. */
  fill (cursor: Cursor, end: number): void {
    const { field } = this
    while (cursor.position < end) {
      const index = this.#next++
      if (field === 6 || field === 7) {
        const size = field === 6 ? 4 : 8
        this.#bytes.set(cursor.bytes.subarray(cursor.position, cursor.position + size), index * size)
        cursor.position += size
        continue
      }
      cursor.varint()
      if (field === 1) this.#bytes[index] = cursor.low !== 0 || cursor.high !== 0 ? 1 : 0
      else if (field === 3 || field === 5) {
        this.#words[2 * index] = cursor.low
        this.#words[2 * index + 1] = cursor.high
      } else this.#words[index] = cursor.low
    }
  }
}

/** Typed contents as typed arrays (`bool_contents` as 0 and 1), `bytes_contents` serialized. */
function contentsOf (input: string, buffer: Buffer, start: number, end: number): InferTensorContents {
  const counts: Record<number, number> = {}
  let serializedBytes = 0
  eachField(buffer, start, end, CONTENTS_WIRES, (field, wire, from, to) => {
    const { element } = CONTENTS[field as ContentsField]
    counts[field] = (counts[field] ?? 0) + (element === DELIMITED ? 1 : elementsIn(buffer, wire, element, from, to))
    if (element === DELIMITED) serializedBytes += 4 + to - from
  })
  const arrays = Object.fromEntries(([1, 2, 3, 4, 5, 6, 7] as const).map((field) =>
    [field, new ELEMENT_ARRAYS[field](counts[field] ?? 0)])) as Record<NumericField, NumericArray>
  const fillers = new Map<number, Filler>()
  const serialized = Buffer.allocUnsafe(serializedBytes)
  let written = 0
  const cursor = new Cursor(buffer, start, end, MESSAGE)
  eachField(buffer, start, end, CONTENTS_WIRES, (field, _wire, from, to) => {
    if (field === 8) {
      serialized.writeUInt32LE(to - from, written)
      buffer.copy(serialized, written + 4, from, to)
      written += 4 + to - from
      return
    }
    const numeric = field as NumericField
    const filler = fillers.get(field) ?? new Filler(numeric, arrays[numeric])
    fillers.set(field, filler)
    cursor.position = from
    filler.fill(cursor, to)
  })
  return {
    bool_contents: arrays[1] as Uint8Array,
    int_contents: arrays[2] as Int32Array,
    int64_contents: arrays[3] as BigInt64Array,
    uint_contents: arrays[4] as Uint32Array,
    uint64_contents: arrays[5] as BigUint64Array,
    fp32_contents: arrays[6] as Float32Array,
    fp64_contents: arrays[7] as Float64Array,
    bytes_contents: parseBytesTensor(input, serialized, counts[8] ?? 0)
  }
}

/** The dimensions of a shape, as numbers (exact below 2^53). */
function shapeOf (buffer: Buffer, start: number, end: number): number[] {
  let count = 0
  eachField(buffer, start, end, INPUT, (field, wire, from, to) => {
    if (field === 3) count += elementsIn(buffer, wire, VARINT, from, to)
  })
  const shape = new Array<number>(count)
  let next = 0
  const cursor = new Cursor(buffer, start, end, MESSAGE)
  eachField(buffer, start, end, INPUT, (field, _wire, from, to) => {
    if (field !== 3) return
    cursor.position = from
    while (cursor.position < to) {
      cursor.varint()
      shape[next++] = signedNumber(cursor.low, cursor.high)
    }
  })
  return shape
}

function inputOf (buffer: Buffer, start: number, end: number): InferInputTensor {
  const input: InferInputTensor = { name: '', datatype: '', shape: [], parameters: {}, contents: null }
  let contents: [number, number] | undefined
  eachField(buffer, start, end, INPUT, (field, _wire, from, to) => {
    if (field === 1) input.name = buffer.toString('utf8', from, to)
    else if (field === 2) input.datatype = KNOWN.read(buffer, from, to)
    else if (field === 4) addParameter(input.parameters, buffer, from, to)
    // A message field sent twice is merged by protobuf; contents are read once, from the last.
    else if (field === 5) contents = [from, to]
  })
  input.shape = shapeOf(buffer, start, end)
  if (contents !== undefined) input.contents = contentsOf(input.name, buffer, ...contents)
  return input
}

function outputOf (buffer: Buffer, start: number, end: number): InferRequestedOutputTensor {
  const output: InferRequestedOutputTensor = { name: '', parameters: {} }
  eachField(buffer, start, end, OUTPUT, (field, _wire, from, to) => {
    if (field === 1) output.name = buffer.toString('utf8', from, to)
    else addParameter(output.parameters, buffer, from, to)
  })
  return output
}

/**
 * The ModelInferRequest of `bytes` (its `raw_input_contents` views of them). Check what it will
 * take first (`checkedDecodedBytes`): this allocates it.
 */
export function decodeModelInferRequest (bytes: Uint8Array): ModelInferRequest {
  const buffer = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const request: ModelInferRequest = { model_name: '', model_version: '', id: '', parameters: {}, inputs: [], outputs: [], raw_input_contents: [] }
  eachField(buffer, 0, buffer.length, REQUEST, (field, _wire, from, to) => {
    if (field === 1) request.model_name = buffer.toString('utf8', from, to)
    else if (field === 2) request.model_version = buffer.toString('utf8', from, to)
    else if (field === 3) request.id = buffer.toString('utf8', from, to)
    else if (field === 4) addParameter(request.parameters, buffer, from, to)
    else if (field === 5) request.inputs.push(inputOf(buffer, from, to))
    else if (field === 6) request.outputs.push(outputOf(buffer, from, to))
    else request.raw_input_contents.push(buffer.subarray(from, to))
  })
  return request
}

/** The deserializer of ModelInfer for grpc-js: every message checked, then decoded. */
export function deserializeModelInferRequest (bytes: Buffer): ModelInferRequest {
  checkedDecodedBytes(bytes)
  return decodeModelInferRequest(bytes)
}
