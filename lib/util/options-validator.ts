/**
 * The one validator of every option and declaration the package takes (the plugin's, the model
 * endpoints', a model declaration, the ONNX runner's): each is checked once, when it is given, so
 * a mistake fails at startup with a sentence naming it instead of misbehaving at the first request.
 */
import Ajv, { type ErrorObject } from 'ajv'

export const positiveInteger = { type: 'integer', minimum: 1, maximum: Number.MAX_SAFE_INTEGER } as const

export const nonNegativeInteger = { type: 'integer', minimum: 0, maximum: Number.MAX_SAFE_INTEGER } as const

const ajv = new Ajv({ allErrors: false, strict: true, verbose: true })

// What JSON schema has no words for: functions, patterns, instances of a class, Infinity.
const CUSTOM_KEYWORDS: Record<string, { test: (value: unknown, schema: unknown) => boolean, says: (schema: unknown) => string }> = {
  isFunction: { test: (value) => typeof value === 'function', says: () => 'must be a function' },
  keyRule: { test: (value) => value instanceof RegExp || typeof value === 'function', says: () => 'must be a RegExp or a function' },
  batchSize: {
    test: (value) => value === Infinity || (Number.isSafeInteger(value) && (value as number) >= 0),
    says: () => 'must be a non-negative integer or Infinity'
  },
  instanceOf: {
    test: (value, Class) => value instanceof (Class as new () => unknown),
    says: (Class) => `must be a ${(Class as { name: string }).name}`
  }
}

for (const [keyword, { test }] of Object.entries(CUSTOM_KEYWORDS)) {
  ajv.addKeyword({ keyword, errors: false, validate: (schema: unknown, value: unknown) => test(value, schema) })
}

/** The first thing wrong with a value: where (`limits.maxRegions`; '' for the value itself), and
 * either the property no schema knows or what the value must be. */
export interface Problem {
  path: string
  /** Set when the problem is a property the schema does not know. */
  unknown?: string
  /** Set when the problem is a property that is missing. */
  missing?: string
  /** What the value at `path` must be (`must be a function`). */
  message: string
}

function problemOf ([error]: ErrorObject[]): Problem {
  const path = error.instancePath.slice(1).replaceAll('/', '.')
  const message = CUSTOM_KEYWORDS[error.keyword]?.says(error.schema) ?? error.message as string
  const joined = (name: string) => (path === '' ? name : `${path}.${name}`)
  if (error.keyword === 'additionalProperties') return { path, message, unknown: joined((error.params as { additionalProperty: string }).additionalProperty) }
  if (error.keyword === 'required') return { path, message, missing: joined((error.params as { missingProperty: string }).missingProperty) }
  return { path, message }
}

/** A check of `schema`: the first problem of a value, or undefined if it is valid. Compiled once. */
export function validatorOf (schema: object): (value: unknown) => Problem | undefined {
  const validate = ajv.compile(schema)
  return (value) => validate(value) ? undefined : problemOf(validate.errors as ErrorObject[])
}

/** A problem with an option, as a sentence: `unknown option 'x'`, `option 'x' is required`,
 * `option 'x' must be ...` (a nested option that lacks one: `must have required property 'y'`). */
export function describeOptionProblem ({ path, unknown, missing, message }: Problem): string {
  if (unknown !== undefined) return `unknown option '${unknown}'`
  if (missing !== undefined && path === '') return `option '${missing}' is required`
  return `option '${path}' ${message}`
}
