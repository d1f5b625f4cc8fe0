/**
 * The parameters of a request that reach its model (`infer.parameters`): those of the request's
 * `parameters` the server does not take for itself, as Triton passes them to its backends. Over
 * HTTP they are the JSON request's (Triton's http_server.cc): the sequence flags, `priority`,
 * `timeout` and `binary_data_output` are the server's, and every other must be a string, a number
 * or a boolean. Other transports read theirs into the same JSON form (lib/grpc/request-parameters.ts).
 */
import type { TensorParameters } from '../../types/kserve'
import * as errors from '../errors'

/** The request parameters Triton's HTTP server takes for itself. */
export const SERVER_PARAMETERS: ReadonlySet<string> = new Set(['sequence_id', 'sequence_start', 'sequence_end', 'priority', 'timeout', 'binary_data_output'])

const NONE: Readonly<TensorParameters> = Object.freeze({})

/** The model's parameters of a JSON request's `parameters`; throws Triton's INVALID_ARG for a
 * value that is no string, number or boolean. Its `triton_` keys were refused before. */
export function modelParametersOfJson (parameters: Record<string, unknown> | undefined): Readonly<TensorParameters> {
  if (parameters === undefined) return NONE
  let model: TensorParameters | undefined
  for (const name of Object.keys(parameters)) {
    if (SERVER_PARAMETERS.has(name)) continue
    const value = parameters[name]
    if (typeof value !== 'string' && typeof value !== 'number' && typeof value !== 'boolean') throw errors.invalidRequestParameter(name)
    model ??= {}
    model[name] = value
  }
  return model === undefined ? NONE : Object.freeze(model)
}
