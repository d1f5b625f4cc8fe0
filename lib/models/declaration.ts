/**
 * A model declaration, checked once when the table is made: a mistake fails at startup with a
 * message naming the model and the field, instead of misbehaving at the first request.
 */
import type { ModelSignature } from '../../types/kserve'
import type { ModelLoadOverrides } from '../../types/models'
import * as errors from '../errors'
import { DATATYPES } from '../kserve/datatypes'
import type { InferRequest } from '../kserve/infer-request'
import { type Problem, validatorOf } from '../util/options-validator'

/**
 * One model (at one or more versions) as the host declares it: its KServe signature (`versions`
 * default `['1']`; -1 in a shape is any size; with `maxBatchSize` above 0 the first dimension of
 * every tensor is the batch), what Triton's model configuration adds, and what runs it.
 */
export interface ModelDeclaration extends ModelSignature {
  /** Triton's `backend` (`onnxruntime`, `python`, ...): shown in the configuration. Default `''`. */
  backend?: string
  /** Triton's `label_filename` of an output, by output name: shown in the configuration. */
  labelFilenames?: Record<string, string>
  /** Whether the model starts ready (see `ModelTable.setReady`). Default true. */
  ready?: boolean
  /** Reads the inputs and fills the outputs of one request; may be async. A throw fails the request. */
  run(infer: InferRequest): void | Promise<void>
  /** Loads a version again in this process, when a load request (the model repository extension)
   * reaches the service: in every process of it, each with its own. The model is declared loaded;
   * this runs for loads asked for later. `overrides` are the request's configuration and files, if
   * the table takes them. A throw fails the load, and leaves the model unavailable. */
  load?(version: string, overrides: ModelLoadOverrides): void | Promise<void>
  /** Unloads a version in this process, once its requests in flight here have ended (after an
   * unload request; in every process of the service). */
  unload?(version: string): void | Promise<void>
}

/** Versions are Triton's int64 version numbers, written as the digits clients send (at most 15,
 * so each is exact as a JSON number in the configuration). */
const VERSION = '^(0|[1-9][0-9]{0,14})$'

export const DEFAULT_VERSIONS = ['1']

const tensors = {
  type: 'array',
  items: {
    type: 'object',
    additionalProperties: false,
    required: ['name', 'datatype', 'shape'],
    properties: {
      name: { type: 'string', minLength: 1 },
      datatype: { enum: [...DATATYPES] },
      shape: { type: 'array', items: { type: 'integer', minimum: -1, maximum: Number.MAX_SAFE_INTEGER } }
    }
  }
}

const problemOf = validatorOf({
  type: 'object',
  additionalProperties: false,
  required: ['name', 'inputs', 'outputs', 'run'],
  properties: {
    name: { type: 'string', minLength: 1 },
    versions: { type: 'array', minItems: 1, uniqueItems: true, items: { type: 'string', pattern: VERSION } },
    platform: { type: 'string' },
    backend: { type: 'string' },
    // Triton's max_batch_size, or Infinity for any batch.
    maxBatchSize: { batchSize: true },
    inputs: tensors,
    outputs: tensors,
    labelFilenames: { type: 'object', additionalProperties: { type: 'string' } },
    ready: { type: 'boolean' },
    run: { isFunction: true },
    load: { isFunction: true },
    unload: { isFunction: true }
  }
})

function describe ({ path, unknown, message }: Problem): string {
  if (unknown !== undefined) return `unknown field '${unknown}'`
  return `${path === '' ? 'the declaration' : `'${path}'`} ${message}`
}

const invalid = (declaration: unknown, reason: string) => {
  const name = (declaration as { name?: unknown } | null)?.name
  return errors.invalidModelDeclaration(typeof name === 'string' ? name : undefined, reason)
}

/** The tensor whose first dimension is not the batch (-1) although the model batches. */
const withoutBatchDimension = ({ inputs, outputs }: ModelDeclaration) =>
  [...inputs, ...outputs].find(({ shape }) => shape[0] !== -1)

/** Returns the declaration if it is valid; throws `ERR_SHM_INVALID_MODEL_DECLARATION` naming the model and the field otherwise. */
export function checkDeclaration (declaration: ModelDeclaration): ModelDeclaration {
  const problem = problemOf(declaration)
  if (problem !== undefined) throw invalid(declaration, describe(problem))
  const unbatched = (declaration.maxBatchSize ?? 0) > 0 ? withoutBatchDimension(declaration) : undefined
  if (unbatched !== undefined) {
    throw invalid(declaration, `tensor '${unbatched.name}' must have -1 as its first dimension: with maxBatchSize above 0 it is the batch`)
  }
  return declaration
}
