/**
 * The parameters of a ModelInferRequest that mean something to the server, read as Triton's gRPC
 * server reads them (src/grpc/infer_handler.cc): the sequence extension's `sequence_id`
 * (int64_param or string_param), `sequence_start` and `sequence_end` (bool_param), and the
 * reserved `triton_` keys, of which only `triton_enable_empty_final_response` (bool_param) is known.
 */
import type { InferParameter, InferParameters } from '../../types/grpc'
import type { SequenceFlags } from '../../types/sequences'
import * as errors from '../errors'
import { correlationIdOf, NO_SEQUENCE } from '../kserve/sequence-flags'

export const EMPTY_FINAL_RESPONSE = 'triton_enable_empty_final_response'

const TRITON_PARAMETERS = [EMPTY_FINAL_RESPONSE]

export interface RequestParameters {
  sequence: SequenceFlags
  /** A decoupled model's final flag is sent as an empty response of its own (Triton's
   * `triton_enable_empty_final_response`). */
  emptyFinalResponse: boolean
}

function bool (name: string, { parameter_choice: choice, bool_param: value }: InferParameter): boolean {
  if (choice !== 'bool_param') throw errors.invalidRequestParameterType(name, 'bool_param')
  return value as boolean
}

/** Triton takes an int64_param as the unsigned id of the same bits. */
function correlationId ({ parameter_choice: choice, int64_param: integer, string_param: text }: InferParameter): bigint | string | undefined {
  if (choice === 'int64_param') return correlationIdOf(BigInt.asUintN(64, BigInt(integer as string)))
  if (choice === 'string_param') return correlationIdOf(text as string)
  throw errors.invalidRequestParameterType('sequence_id', 'int64_param or string_param')
}

const NONE: RequestParameters = Object.freeze({ sequence: NO_SEQUENCE, emptyFinalResponse: false })

/** The request's sequence flags and options; throws Triton's INVALID_ARG for a parameter of the wrong type. */
export function requestParameters (parameters: InferParameters): RequestParameters {
  let sequence = NO_SEQUENCE
  let emptyFinalResponse = false
  let any = false
  for (const name in parameters) {
    const parameter = parameters[name]
    any = true
    if (name === 'sequence_id') sequence = { ...sequence, correlationId: correlationId(parameter) }
    else if (name === 'sequence_start') sequence = { ...sequence, start: bool(name, parameter) }
    else if (name === 'sequence_end') sequence = { ...sequence, end: bool(name, parameter) }
    else if (name.startsWith('triton_')) {
      if (!TRITON_PARAMETERS.includes(name)) throw errors.reservedParameter(TRITON_PARAMETERS)
      emptyFinalResponse = bool(name, parameter)
    }
  }
  return any ? { sequence, emptyFinalResponse } : NONE
}
