/** Each kind of this package's errors as its HTTP status: written once for every route. */
import type { AnsweredKind } from '../errors'

export const HTTP_STATUS: Readonly<Record<AnsweredKind, number>> = {
  invalid: 400,
  // Triton answers ALREADY_EXISTS with 400 over HTTP.
  exists: 400,
  'not-found': 404,
  // The client named memory the server cannot use as asked: its doing (Triton answers 500).
  unusable: 400,
  denied: 403,
  restricted: 403,
  unsupported: 501,
  unavailable: 503,
  exhausted: 503,
  // nginx's "client closed request": logged like any client error, never sent.
  cancelled: 499,
  internal: 500,
  'method-not-allowed': 405,
  'too-long': 414
}
