/**
 * gRPC parameters (`map<string, InferParameter>`) as the KServe helpers read them: the shared
 * memory ones, checked for the type Triton requires. Other parameters mean nothing to the helpers.
 */
import type { TensorParameters } from '../../types/kserve'
import type { InferParameter, InferParameters, ParameterChoice } from '../../types/grpc'
import * as errors from '../errors'

const SHARED_MEMORY_PARAMETERS: Record<string, ParameterChoice> = {
  shared_memory_region: 'string_param',
  shared_memory_offset: 'int64_param',
  shared_memory_byte_size: 'int64_param'
}

/** An int64 arrives as a decimal string: as a number, inexact above 2^53, which the registry's
 * bounds checks still refuse (no int64 reaches 2^64 with another). */
const valueOf = (parameter: InferParameter, choice: ParameterChoice): string | number =>
  choice === 'string_param' ? parameter.string_param as string : Number(parameter.int64_param)

/** The shared memory parameters of tensor `tensor`, typed as Triton requires; the others dropped. */
export function sharedMemoryParameters (tensor: string, parameters: InferParameters): TensorParameters {
  const values: TensorParameters = {}
  for (const [name, expected] of Object.entries(SHARED_MEMORY_PARAMETERS)) {
    if (!Object.hasOwn(parameters, name)) continue
    const choice = parameters[name].parameter_choice
    if (choice !== expected) throw errors.invalidParameterType(name, tensor, expected)
    values[name] = valueOf(parameters[name], choice)
  }
  if (values.shared_memory_region === undefined) {
    const stray = ['shared_memory_offset', 'shared_memory_byte_size'].find((name) => values[name] !== undefined)
    if (stray !== undefined) throw errors.sharedMemoryParameterWithoutRegion(stray, tensor)
  }
  return values
}
