/**
 * The sequence parameters of a request (Triton's sequence extension): `sequence_id` (an unsigned
 * integer or a string), `sequence_start`, `sequence_end`, read as Triton's HTTP server reads
 * them from the JSON `parameters` of the request, with its messages. Other transports read their
 * own parameters into the same `SequenceFlags` (lib/grpc/request-parameters.ts).
 */
import type { TensorParameters } from '../../types/kserve'
import type { SequenceFlags } from '../../types/sequences'
import * as errors from '../errors'

/** Triton's longest string correlation id, in bytes (its UTF-8, as Triton's strings are). */
export const MAX_CORRELATION_ID_BYTES = 128

export const NO_SEQUENCE: Readonly<SequenceFlags> = Object.freeze({ start: false, end: false })

/** A correlation id as Triton keeps one: 0 and `""` mean none. */
export function correlationIdOf (value: bigint | string): bigint | string | undefined {
  if (typeof value === 'string' && Buffer.byteLength(value) > MAX_CORRELATION_ID_BYTES) throw errors.correlationIdTooLong()
  return value === 0n || value === '' ? undefined : value
}

function jsonCorrelationId (value: unknown): bigint | string | undefined {
  if (typeof value === 'string') return correlationIdOf(value)
  if (typeof value === 'number' && Number.isInteger(value) && value >= 0) {
    if (!Number.isSafeInteger(value)) {
      throw errors.unparsableRequestParameter('sequence_id', `${value} is above 2^53-1 and cannot be read exactly from JSON here: send it as a string`)
    }
    return correlationIdOf(BigInt(value))
  }
  // Triton tries an unsigned integer, then a string: the second failure is the one it reports.
  throw errors.unparsableRequestParameter('sequence_id', 'attempt to access JSON non-string as string')
}

function jsonFlag (parameter: string, value: unknown): boolean {
  if (typeof value !== 'boolean') throw errors.unparsableRequestParameter(parameter, 'attempt to access JSON non-boolean as boolean')
  return value
}

/** The sequence flags of a JSON request's `parameters`; its reserved `triton_` keys refused, as Triton's HTTP server does. */
export function sequenceFlagsOfJson (parameters: TensorParameters | undefined): SequenceFlags {
  if (parameters === undefined) return NO_SEQUENCE
  let flags: SequenceFlags | undefined
  for (const name of Object.keys(parameters)) {
    const value = parameters[name]
    switch (name) {
      case 'sequence_id':
        flags = { ...flags ?? NO_SEQUENCE, correlationId: jsonCorrelationId(value) }
        break
      case 'sequence_start':
        flags = { ...flags ?? NO_SEQUENCE, start: jsonFlag(name, value) }
        break
      case 'sequence_end':
        flags = { ...flags ?? NO_SEQUENCE, end: jsonFlag(name, value) }
        break
      default:
        if (name.startsWith('triton_')) throw errors.reservedParameter()
    }
  }
  return flags ?? NO_SEQUENCE
}
