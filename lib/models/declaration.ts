/**
 * A model declaration, checked once when the table is made: a mistake fails at startup with a
 * message naming the model and the field, instead of misbehaving at the first request.
 */
import type { EnsembleScheduling } from '../../types/ensembles'
import type { ModelSignature } from '../../types/kserve'
import type { SequenceBatching } from '../../types/sequences'
import type { ModelLoadOverrides } from '../../types/models'
import * as errors from '../errors'
import { DATATYPES } from '../kserve/datatypes'
import type { InferRequest } from '../kserve/infer-request'
import { positiveInteger, type Problem, validatorOf } from '../util/options-validator'

/** What every declaration says: its KServe signature and what Triton's model configuration adds. */
export interface ModelDeclarationFields extends ModelSignature {
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
  /** Triton's `instance_group` count: at most this many of a version's requests run at once in
   * this process; the others wait for an instance in the order they came (their wait is timed as
   * `queue`). Default: no limit (the configuration shows one instance). */
  instanceCount?: number
  /** Loads a version again in this process, when a load request (the model repository extension)
   * reaches the service: in every process of it, each with its own. The model is declared loaded;
   * this runs for loads asked for later. `overrides` are the request's configuration and files, if
   * the table takes them. A throw fails the load, and leaves the model unavailable. */
  load?(version: string, overrides: ModelLoadOverrides): void | Promise<void>
  /** Unloads a version in this process, once its requests in flight here have ended (after an
   * unload request; in every process of the service). */
  unload?(version: string): void | Promise<void>
  /** Reads the inputs and fills the outputs of one request; may be async. A throw fails the
   * request. Every model but an ensemble has one. */
  run?(infer: InferRequest): void | Promise<void>
  /** Triton's `ensemble_scheduling`: the model is an ensemble, which runs other models of its
   * table step by step on the request's tensors (platform `ensemble`, no `run`). It is decoupled
   * if any of its steps is. Checked against the table's other models when the table is made. */
  ensembleScheduling?: EnsembleScheduling
}

/**
 * One model (at one or more versions) as the host declares it: its KServe signature (`versions`
 * default `['1']`; -1 in a shape is any size; with `maxBatchSize` above 0 the first dimension of
 * every tensor is the batch), what Triton's model configuration adds, and what runs it: its
 * `run`, or, for an ensemble, its `ensembleScheduling` (one of them, never both).
 */
export type ModelDeclaration = ModelDeclarationFields &
  ({ run(infer: InferRequest): void | Promise<void> } | { ensembleScheduling: EnsembleScheduling })

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
      shape: { type: 'array', items: { type: 'integer', minimum: -1, maximum: Number.MAX_SAFE_INTEGER } },
      optional: { type: 'boolean' },
      labels: { type: 'array', items: { type: 'string' } }
    }
  }
}

const tensorMap = { type: 'object', additionalProperties: { type: 'string', minLength: 1 } }

const problemOf = validatorOf({
  type: 'object',
  additionalProperties: false,
  required: ['name', 'inputs', 'outputs'],
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
    instanceCount: positiveInteger,
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
    ensembleScheduling: {
      type: 'object',
      additionalProperties: false,
      required: ['steps'],
      properties: {
        steps: {
          type: 'array',
          minItems: 1,
          items: {
            type: 'object',
            additionalProperties: false,
            required: ['model', 'inputMap', 'outputMap'],
            properties: {
              model: { type: 'string', minLength: 1 },
              version: { type: 'string', pattern: VERSION },
              inputMap: tensorMap,
              outputMap: tensorMap
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

/** What is wrong with what runs the model, if anything: a `run`, or else the steps of an ensemble. */
function runProblem ({ run, ensembleScheduling, decoupled, sequenceBatching }: ModelDeclaration): string | undefined {
  if (ensembleScheduling === undefined) return run === undefined ? "the declaration must have property 'run' (or 'ensembleScheduling')" : undefined
  if (run !== undefined) return "an ensemble ('ensembleScheduling') has no 'run': its steps run it"
  if (decoupled !== undefined) return "an ensemble has no 'decoupled': it is decoupled if one of its steps is"
  return sequenceBatching !== undefined ? "an ensemble has no 'sequenceBatching'" : undefined
}

/** An input may be optional, an output may have labels; not the other way round. */
function tensorProblem ({ inputs, outputs }: ModelDeclaration): string | undefined {
  const labelled = inputs.find(({ labels }) => labels !== undefined)
  if (labelled !== undefined) return `input '${labelled.name}' has 'labels': only outputs have labels`
  const optional = outputs.find(({ optional }) => optional !== undefined)
  return optional === undefined ? undefined : `output '${optional.name}' has 'optional': only inputs may be optional`
}

/** Returns the declaration if it is valid; throws `ERR_SHM_INVALID_MODEL_DECLARATION` naming the model and the field otherwise. */
export function checkDeclaration (declaration: ModelDeclaration): ModelDeclaration {
  const problem = problemOf(declaration)
  if (problem !== undefined) throw invalid(declaration, describe(problem))
  const running = runProblem(declaration)
  if (running !== undefined) throw invalid(declaration, running)
  const tensors = tensorProblem(declaration)
  if (tensors !== undefined) throw invalid(declaration, tensors)
  const unbatched = (declaration.maxBatchSize ?? 0) > 0 ? withoutBatchDimension(declaration) : undefined
  if (unbatched !== undefined) {
    throw invalid(declaration, `tensor '${unbatched.name}' must have -1 as its first dimension: with maxBatchSize above 0 it is the batch`)
  }
  const controls = controlProblem(declaration)
  if (controls !== undefined) throw invalid(declaration, controls)
  return declaration
}
