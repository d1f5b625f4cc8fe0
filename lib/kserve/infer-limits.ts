/** What one infer request may cost by default (see `InferLimits`, and SECURITY.md for the multiples). */
import type { InferLimits } from '../../types/kserve'
import { positiveInteger } from '../util/options-validator'

export const DEFAULT_INFER_LIMITS: Readonly<Required<InferLimits>> = {
  // None: an input's elements are bounded by its bytes, an output's by the in-flight budget.
  maxBytesElements: Number.POSITIVE_INFINITY,
  maxJsonResponseChars: 2 ** 28,
  maxOutputBytes: 2 ** 26,
  sendTimeoutMs: 30_000
}

/** The JSON part of an infer body, by default: Triton's own HTTP limit (`--http-max-input-size`). */
export const DEFAULT_JSON_LIMIT = 64 * 1024 * 1024

/** The schema of an `InferLimits` option. */
export const inferLimitsSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    maxBytesElements: positiveInteger,
    maxJsonResponseChars: positiveInteger,
    maxOutputBytes: positiveInteger,
    sendTimeoutMs: positiveInteger
  }
} as const
