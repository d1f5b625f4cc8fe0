/**
 * The parameters of a ModelInferRequest, read as Triton's gRPC server reads them
 * (src/grpc/infer_handler.cc): the sequence extension's `sequence_id` (int64_param or
 * string_param), `sequence_start` and `sequence_end` (bool_param), `priority` and `timeout`, the
 * reserved `triton_` keys, of which only `triton_enable_empty_final_response` (bool_param) is
 * known; every other is the model's (`infer.parameters`), an int64, bool, string or double.
 */
import type { TensorParameters } from '../../types/kserve'
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

/** The parameters the server takes for itself: not the model's. */
const SERVER_PARAMETERS = new Set(['sequence_id', 'sequence_start', 'sequence_end', 'priority', 'timeout'])

/** A model's parameter in its JSON form: an int64 as a number (inexact above 2^53). */
function modelValue (name: string, { parameter_choice: choice, ...values }: InferParameter): string | number | boolean {
  switch (choice) {
    case 'int64_param': return Number(values.int64_param)
    case 'bool_param': return values.bool_param as boolean
    case 'string_param': return values.string_param as string
    case 'double_param': return values.double_param as number
    default: throw errors.invalidRequestParameterType(name, 'int64_param, bool_param, or string_param')
  }
}

/** The request's parameters that are the model's, as a JSON request carries them. */
export function modelParameters (parameters: InferParameters): TensorParameters {
  const model: TensorParameters = {}
  for (const name in parameters) {
    if (!SERVER_PARAMETERS.has(name) && !name.startsWith('triton_')) model[name] = modelValue(name, parameters[name])
  }
  return model
}
