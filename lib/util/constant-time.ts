/**
 * A secret compared in constant time: the restricted API's header value (an HTTP header, gRPC
 * metadata) must not be guessable from how long a refusal takes.
 */
import { timingSafeEqual } from 'node:crypto'

/** True when `sent` is the expected value, compared in constant time. It must be there: with an
 * empty expected value, a request without it must not pass. */
export function carriesSecret (sent: string | undefined, expected: Buffer): boolean {
  if (sent === undefined) return false
  const received = Buffer.from(sent)
  return received.length === expected.length && timingSafeEqual(received, expected)
}
