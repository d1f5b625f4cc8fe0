/**
 * Turns the first schema violation of a register body into the message a Triton client expects.
 * Missing fields get Triton's words; type errors, which Triton reports as a 500, get a 400 that
 * names the field.
 */
import type { FastifySchemaValidationError } from 'fastify/types/schema'
import * as errors from './errors'
import type { SharedMemoryError } from './errors'

const EXPECTED: Record<string, string> = {
  key: 'a string',
  offset: 'an unsigned integer',
  byte_size: 'an unsigned integer'
}

export function formatValidationError (validationErrors: FastifySchemaValidationError[]): SharedMemoryError {
  const [{ keyword, instancePath, params }] = validationErrors
  if (keyword === 'required') return errors.missingField(String(params.missingProperty))
  const field = instancePath.slice(1)
  if (field === '') return errors.invalidBody('the body must be a JSON object')
  if (keyword === 'maximum') return errors.unrepresentableField(field)
  return errors.invalidField(field, EXPECTED[field])
}
