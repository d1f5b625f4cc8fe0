/**
 * A model declaration, checked once when the table is made: a mistake fails at startup with a
 * message naming the model and the field, instead of misbehaving at the first request.
 */
import Ajv, { type ErrorObject } from 'ajv'
import type { ModelDeclaration } from '../../types/models'
import { DATATYPES } from '../kserve/datatypes'

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

const declarationSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['name', 'inputs', 'outputs', 'run'],
  properties: {
    name: { type: 'string', minLength: 1 },
    versions: { type: 'array', minItems: 1, uniqueItems: true, items: { type: 'string', pattern: VERSION } },
    platform: { type: 'string' },
    backend: { type: 'string' },
    maxBatchSize: { batchSize: true },
    inputs: tensors,
    outputs: tensors,
    labelFilenames: { type: 'object', additionalProperties: { type: 'string' } },
    ready: { type: 'boolean' },
    run: { isFunction: true }
  }
}

const ajv = new Ajv({ allErrors: false, strict: true })
ajv.addKeyword({ keyword: 'isFunction', schemaType: 'boolean', errors: false, validate: (_: boolean, value: unknown) => typeof value === 'function' })
// Triton's max_batch_size, or Infinity for any batch (which JSON schema's numbers exclude).
ajv.addKeyword({
  keyword: 'batchSize',
  schemaType: 'boolean',
  errors: false,
  validate: (_: boolean, value: unknown) => value === Infinity || (Number.isSafeInteger(value) && (value as number) >= 0)
})
const validate = ajv.compile<ModelDeclaration>(declarationSchema)

function describeError ([error]: ErrorObject[]): string {
  const path = error.instancePath.slice(1).replaceAll('/', '.')
  if (error.keyword === 'additionalProperties') {
    return `unknown field '${[path, (error.params as { additionalProperty: string }).additionalProperty].filter(Boolean).join('.')}'`
  }
  if (error.keyword === 'isFunction') return `'${path}' must be a function`
  if (error.keyword === 'batchSize') return `'${path}' must be a non-negative integer or Infinity`
  return `${path === '' ? 'the declaration' : `'${path}'`} ${error.message}`
}

const invalid = (declaration: unknown, reason: string) => {
  const name = (declaration as { name?: unknown } | null)?.name
  return new TypeError(`fastify-triton-shm: model${typeof name === 'string' ? ` '${name}'` : ''}: ${reason}`)
}

/** The tensor whose first dimension is not the batch (-1) although the model batches. */
const withoutBatchDimension = ({ inputs, outputs }: ModelDeclaration) =>
  [...inputs, ...outputs].find(({ shape }) => shape[0] !== -1)

/** Returns the declaration if it is valid; throws a TypeError naming the model and the field otherwise. */
export function checkDeclaration (declaration: ModelDeclaration): ModelDeclaration {
  if (!validate(declaration)) throw invalid(declaration, describeError(validate.errors as ErrorObject[]))
  const unbatched = (declaration.maxBatchSize ?? 0) > 0 ? withoutBatchDimension(declaration) : undefined
  if (unbatched !== undefined) {
    throw invalid(declaration, `tensor '${unbatched.name}' must have -1 as its first dimension: with maxBatchSize above 0 it is the batch`)
  }
  return declaration
}
