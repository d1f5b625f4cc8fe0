/**
 * A model declaration, checked once when the table is made: a mistake fails at startup with a
 * message naming the model and the field, instead of misbehaving at the first request.
 */
import type { ModelSignature } from '../../types/kserve'
import type { SequenceBatching } from '../../types/sequences'
import type { ModelLoadOverrides } from '../../types/models'
import * as errors from '../errors'
import { DATATYPES } from '../kserve/datatypes'
import type { InferRequest } from '../kserve/infer-request'
import { positiveInteger, type Problem, validatorOf } from '../util/options-validator'

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
  /**
   * Triton's `model_transaction_policy.decoupled`: the run answers a request with zero or more
   * responses, each sent with `await infer.send()`, and then completes (the final flag). Served
   * over gRPC's ModelStreamInfer; HTTP and ModelInfer refuse it, as Triton's do. Default false.
   */
  decoupled?: boolean
  /** Triton's `sequence_batching`: a stateful model, whose runs get their sequence and its state
   * (`infer.sequence`) and the control inputs it declares. Default: a model without state. */
  sequenceBatching?: SequenceBatching
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
    decoupled: { type: 'boolean' },
    sequenceBatching: {
      type: 'object',
      additionalProperties: false,
      properties: {
        maxSequenceIdleMicroseconds: positiveInteger,
        controlInputs: {
          type: 'array',
          items: {
            type: 'object',
            additionalProperties: false,
            required: ['name', 'kind', 'datatype'],
            properties: {
              name: { type: 'string', minLength: 1 },
              kind: { enum: ['CONTROL_SEQUENCE_START', 'CONTROL_SEQUENCE_END', 'CONTROL_SEQUENCE_READY', 'CONTROL_SEQUENCE_CORRID'] },
              datatype: { enum: ['INT32', 'FP32', 'BOOL', 'UINT64', 'INT64', 'UINT32', 'BYTES'] },
              falseTrue: { type: 'array', minItems: 2, maxItems: 2, items: { type: 'number' } }
            }
          }
        }
      }
    },
    run: { isFunction: true },
    load: { isFunction: true },
    unload: { isFunction: true }
  }
})

/** The datatypes Triton allows each control kind: a flag's, or the correlation id's. */
const FLAG_DATATYPES = ['INT32', 'FP32', 'BOOL']
const CORRELATION_ID_DATATYPES = ['UINT64', 'INT64', 'UINT32', 'INT32', 'BYTES']

/** What is wrong with the control inputs of a stateful model, if anything. */
function controlProblem ({ inputs, sequenceBatching }: ModelDeclaration): string | undefined {
  const names = new Set(inputs.map(({ name }) => name))
  const kinds = new Set<string>()
  for (const [index, { name, kind, datatype, falseTrue }] of (sequenceBatching?.controlInputs ?? []).entries()) {
    const at = `'sequenceBatching.controlInputs.${index}'`
    if (names.has(name)) return `${at}: '${name}' is the name of an input or of another control input`
    names.add(name)
    if (kinds.has(kind)) return `${at}: a second ${kind} control`
    kinds.add(kind)
    const corrid = kind === 'CONTROL_SEQUENCE_CORRID'
    if (!(corrid ? CORRELATION_ID_DATATYPES : FLAG_DATATYPES).includes(datatype)) {
      return `${at}: a ${kind} control must be one of ${(corrid ? CORRELATION_ID_DATATYPES : FLAG_DATATYPES).join(', ')}`
    }
    if (corrid && falseTrue !== undefined) return `${at}: a ${kind} control has no 'falseTrue'`
  }
  return undefined
}

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
  const controls = controlProblem(declaration)
  if (controls !== undefined) throw invalid(declaration, controls)
  return declaration
}
