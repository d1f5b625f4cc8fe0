/**
 * ModelInferResponse written by the package itself, for the listener's own ModelInfer: measured,
 * then written into one buffer behind gRPC's length prefix, so the answer is one write of one
 * chunk. (protobufjs makes a message object and a writer's list of operations per answer, and the
 * prefix was a chunk of its own.) The bytes are protobufjs's for the same response: fields in
 * number order, every string written (empty ones too, as protobufjs writes every field set), an
 * empty shape left out.
 */
import type { InferOutputTensor, ModelInferResponse } from '../../types/grpc'
import { MESSAGE_PREFIX_BYTES } from './protocol'
import { DELIMITED } from './protobuf-wire'

const tag = (field: number, wire: number): number => (field << 3) | wire

/** A text's UTF-8 length. Names and datatypes are short and ASCII: read in JavaScript, they are
 * measured and written sooner than through Buffer's native calls. */
function utf8Bytes (text: string): number {
  for (let index = 0; index < text.length; index++) if (text.charCodeAt(index) >= 128) return Buffer.byteLength(text)
  return text.length
}

/** Bytes of a varint: an int64's two's complement for a negative one (always ten). */
function varintBytes (value: number): number {
  if (value < 0) return 10
  let bytes = 1
  for (let rest = value; rest >= 128; rest = Math.floor(rest / 128)) bytes++
  return bytes
}

/** Writes the pieces of one message in order, from `offset` of `buffer`. */
class Writer {
  constructor (readonly buffer: Buffer, public offset: number) {}

  varint (value: number): void {
    if (value < 0) return this.#negative(value)
    let rest = value
    while (rest >= 128) {
      this.buffer[this.offset++] = (rest % 128) | 128
      rest = Math.floor(rest / 128)
    }
    this.buffer[this.offset++] = rest
  }

  #negative (value: number): void {
    let rest = BigInt.asUintN(64, BigInt(value))
    for (let index = 0; index < 9; index++) {
      this.buffer[this.offset++] = Number(rest & 127n) | 128
      rest >>= 7n
    }
    this.buffer[this.offset++] = Number(rest)
  }

  /** A length-delimited field's tag and length; its `length` bytes follow. */
  delimited (field: number, length: number): void {
    this.varint(tag(field, DELIMITED))
    this.varint(length)
  }

  string (field: number, text: string, bytes: number): void {
    this.delimited(field, bytes)
    if (bytes !== text.length) {
      this.offset += this.buffer.write(text, this.offset)
      return
    }
    for (let index = 0; index < bytes; index++) this.buffer[this.offset++] = text.charCodeAt(index)
  }
}

const delimitedBytes = (field: number, length: number): number => varintBytes(tag(field, DELIMITED)) + varintBytes(length) + length
const shapeBytes = (shape: number[]): number => shape.reduce((total, dim) => total + varintBytes(dim), 0)

/** An output tensor's fields' sizes: its name and datatype in UTF-8, its packed shape. */
interface OutputSizes { name: number, datatype: number, shape: number, total: number }

function outputSizes (output: InferOutputTensor): OutputSizes {
  const name = utf8Bytes(output.name)
  const datatype = utf8Bytes(output.datatype)
  const shape = shapeBytes(output.shape)
  const total = delimitedBytes(1, name) + delimitedBytes(2, datatype) + (output.shape.length === 0 ? 0 : delimitedBytes(3, shape))
  return { name, datatype, shape, total }
}

/** A response measured: its message's length, known before anything is allocated for it, and
 * the message written, when asked, behind its 5-byte prefix (uncompressed, and the length). */
export class ModelInferResponseFrame {
  /** The message's bytes, the prefix not counted. */
  readonly messageBytes: number
  readonly #sizes: { model: number, version: number, id: number, outputs: OutputSizes[] }

  constructor (private readonly response: ModelInferResponse) {
    const { model_name: model, model_version: version, id, outputs, raw_output_contents: raw } = response
    const sizes = { model: utf8Bytes(model), version: utf8Bytes(version), id: utf8Bytes(id), outputs: outputs.map(outputSizes) }
    this.#sizes = sizes
    this.messageBytes = delimitedBytes(1, sizes.model) + delimitedBytes(2, sizes.version) + delimitedBytes(3, sizes.id) +
      sizes.outputs.reduce((total, output) => total + delimitedBytes(5, output.total), 0) +
      raw.reduce((total, bytes) => total + delimitedBytes(6, bytes.byteLength), 0)
  }

  /** The framed message: one buffer, ready to send. */
  write (): Buffer {
    const { model_name: model, model_version: version, id, outputs, raw_output_contents: raw } = this.response
    const sizes = this.#sizes
    const frame = Buffer.allocUnsafe(MESSAGE_PREFIX_BYTES + this.messageBytes)
    frame[0] = 0
    frame.writeUInt32BE(this.messageBytes, 1)
    const writer = new Writer(frame, MESSAGE_PREFIX_BYTES)
    writer.string(1, model, sizes.model)
    writer.string(2, version, sizes.version)
    writer.string(3, id, sizes.id)
    outputs.forEach((output, index) => writeOutput(writer, output, sizes.outputs[index]))
    for (const bytes of raw) {
      writer.delimited(6, bytes.byteLength)
      frame.set(bytes, writer.offset)
      writer.offset += bytes.byteLength
    }
    return frame
  }
}

function writeOutput (writer: Writer, { name, datatype, shape }: InferOutputTensor, sizes: OutputSizes): void {
  writer.delimited(5, sizes.total)
  writer.string(1, name, sizes.name)
  writer.string(2, datatype, sizes.datatype)
  if (shape.length === 0) return
  writer.delimited(3, sizes.shape)
  for (const dim of shape) writer.varint(dim)
}
