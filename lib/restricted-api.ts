/**
 * The restricted API (`restrictedApi` option): a request must carry the configured header with
 * the configured value. One comparison for both transports (an HTTP header, gRPC metadata).
 */
import { timingSafeEqual } from 'node:crypto'

/** True when `sent` is the expected value, compared in constant time. The header must be there:
 * with an empty expected value, a request without it must not pass. */
export function carriesSecret (sent: string | undefined, expected: Buffer): boolean {
  if (sent === undefined) return false
  const received = Buffer.from(sent)
  return received.length === expected.length && timingSafeEqual(received, expected)
}
