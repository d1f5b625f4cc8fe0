/**
 * A register request's fields, as any transport delivers them, read into what the registry takes:
 * `key` a string; `offset` (default 0) and `byte_size` unsigned integers, exact. JSON gives
 * numbers; gRPC gives uint64 values, which its face decodes to bigints. Nothing is coerced: a
 * string is no number, and an integer a JavaScript number cannot hold exactly is refused, never
 * rounded. The checks run in the order Triton's clients see them: the body, the missing fields,
 * then each field in turn.
 */
import type { RegionSource } from '../../types'
import * as errors from '../errors'

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value)

function unsignedField (field: string, value: unknown): number {
  // gRPC's uint64: never negative.
  if (typeof value === 'bigint') {
    if (value > BigInt(Number.MAX_SAFE_INTEGER)) throw errors.unrepresentableField(field)
    return Number(value)
  }
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0) throw errors.invalidField(field, 'an unsigned integer')
  if (value > Number.MAX_SAFE_INTEGER) throw errors.unrepresentableField(field)
  return value
}

/** The region a register request names; throws Triton's error (or a clear 400) for the first wrong field. */
export function regionSourceOf (body: unknown): RegionSource {
  if (!isObject(body)) throw errors.invalidBody('the body must be a JSON object')
  if (body.key === undefined) throw errors.missingField('key')
  if (body.byte_size === undefined) throw errors.missingField('byte_size')
  if (typeof body.key !== 'string') throw errors.invalidField('key', 'a string')
  const offset = body.offset === undefined ? 0 : unsignedField('offset', body.offset)
  return { key: body.key, offset, byteSize: unsignedField('byte_size', body.byte_size) }
}
