/**
 * Triton's check of a model name a client asks to load (its repository manager's
 * `ValidateModelName`): Triton reads a model from the directory of that name, so a name that could
 * reach outside the repository is refused, as is a blank one. The table reads no directory, and
 * answers the same: a client's checks against Triton hold here.
 */
import * as errors from '../errors'

/** The characters C's `isspace` takes, which Triton trims off a name (JavaScript's `trim` takes more). */
const C_SPACE_AT_ENDS = /^[ \t\n\v\f\r]+|[ \t\n\v\f\r]+$/g

/** Throws Triton's INVALID_ARG for a name blank once trimmed, or one that is `..` or has a `/` once trimmed. */
export function checkNameToLoad (name: string): void {
  const trimmed = name.replace(C_SPACE_AT_ENDS, '')
  if (trimmed === '') throw errors.modelNameEmpty()
  if (trimmed === '..' || trimmed.includes('/')) throw errors.modelNameTraversal(name)
}
