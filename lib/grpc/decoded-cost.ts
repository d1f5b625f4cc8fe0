/**
 * What a request message takes once decoded, and how much of it the plugin's listener allows: it
 * measures every message on its bytes before it decodes it (ModelInferRequest with its own
 * decoder, every other request as proto-loader decodes it), so a message that would take far more
 * than its bytes is refused before anything is allocated. A message that arrived compressed is
 * allowed less: its inflated bytes cost its client nothing to send.
 */
import * as errors from '../errors'
import { DELIMITED, eachField } from './protobuf-wire'

const MiB = 1024 ** 2

/** What a decoded form takes besides its arrays: an object, a string, a Buffer view. */
export const OBJECT_BYTES = 256
export const VIEW_BYTES = 96
export const stringBytes = (length: number): number => 32 + 2 * length

/** A number of proto-loader's decoded form: a double, or an int64 as a Long and its decimal string. */
const SCALAR_BYTES = 128

/**
 * What the decoded form of a message of `byteSize` bytes may take besides the message: 8 times it
 * (an int64 element of one byte takes 8), or 3 times it for a message that arrived compressed, so
 * that inflated and decoded it holds at most 4 times its inflated size; and 1 MiB besides, for the
 * objects of any ordinary request.
 */
export const allowedDecodedBytes = (byteSize: number, compressed = false): number => (compressed ? 3 : 8) * byteSize + MiB

/** `decodedBytes`, or `ERR_SHM_MESSAGE_TOO_COSTLY` past `allowedDecodedBytes`. */
export function checkedDecodedCost (message: string, byteSize: number, decodedBytes: number, compressed: boolean): number {
  const allowed = allowedDecodedBytes(byteSize, compressed)
  if (decodedBytes > allowed) throw errors.messageTooCostly(message, byteSize, decodedBytes, allowed)
  return decodedBytes
}

/** The fields of a message that are messages themselves, by number (a map's entries are), each
 * with its own; every other field is a number, a string or bytes. */
export interface Nested { [field: number]: Nested }

/**
 * Bytes the message `message` takes once proto-loader decodes it (protobufjs' object, then the
 * plain one proto-loader makes of it: two objects a message) besides its own bytes: a string at
 * two bytes a byte, bytes as a view, a number as an int64 would take. Fields it does not know count
 * as much, though protobufjs skips them. Throws `ERR_SHM_MALFORMED_MESSAGE` for bytes that are no
 * message. Allocates nothing.
 */
export function protoLoaderDecodedBytes (message: string, bytes: Uint8Array, nested: Nested = {}, start = 0, end = bytes.length): number {
  let total = 2 * OBJECT_BYTES
  eachField(message, bytes, start, end, undefined, (field, wire, from, to) => {
    const inner = nested[field]
    if (inner !== undefined && wire === DELIMITED) total += protoLoaderDecodedBytes(message, bytes, inner, from, to)
    else total += wire === DELIMITED ? VIEW_BYTES + 2 * (to - from) : SCALAR_BYTES
  })
  return total
}
