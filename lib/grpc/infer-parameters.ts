/**
 * gRPC parameters (`map<string, InferParameter>`) of a tensor as the KServe helpers read them: the
 * shared memory ones, and an output's `classification`, checked as Triton checks them. Other
 * parameters mean nothing to the helpers.
 */
import type { TensorParameters } from '../../types/kserve'
import type { InferParameter, InferParameters, ParameterChoice } from '../../types/grpc'
import * as errors from '../errors'

const SHARED_MEMORY_PARAMETERS: ReadonlyArray<readonly [string, ParameterChoice]> = [
  ['shared_memory_region', 'string_param'],
  ['shared_memory_offset', 'int64_param'],
  ['shared_memory_byte_size', 'int64_param']
]

/** The names of the tensor parameters read here. */
export const TENSOR_PARAMETER_NAMES: readonly string[] = [...SHARED_MEMORY_PARAMETERS.map(([name]) => name), 'classification']

/** An int64 arrives as a decimal string: as a number, inexact above 2^53, which the registry's
 * bounds checks still refuse (no int64 reaches 2^64 with another). */
const valueOf = (parameter: InferParameter, choice: ParameterChoice): string | number =>
  choice === 'string_param' ? parameter.string_param as string : Number(parameter.int64_param)

/** The shared memory parameters of tensor `tensor`, typed as Triton requires; the others dropped. */
export function sharedMemoryParameters (tensor: string, parameters: InferParameters): TensorParameters {
  const values: TensorParameters = {}
  for (const [name, expected] of SHARED_MEMORY_PARAMETERS) {
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

/** An output's `classification` count (Triton's classification extension), if it asks for one:
 * an int64_param above 0, never with shared memory. */
export function classificationParameter (parameters: InferParameters, inSharedMemory: boolean): number | undefined {
  if (!Object.hasOwn(parameters, 'classification')) return undefined
  const { parameter_choice: choice, int64_param: count } = parameters.classification
  if (choice !== 'int64_param') throw errors.invalidClassificationType()
  if (!(Number(count) > 0)) throw errors.invalidClassificationCount()
  if (inSharedMemory) throw errors.outputSharedMemoryAndClassification(true)
  return Number(count)
}
