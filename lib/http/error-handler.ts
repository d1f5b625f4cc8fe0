/**
 * The KServe error shape, `{"error": <message>}`, as an error handler for inference routes (and
 * the shared memory API's own routes). This package's errors take the status of their kind; an
 * error of Fastify (body too large...) or of a host plugin (rate limit 429, under-pressure 503)
 * keeps its own status and message. Any other error is a bug: its message may name internals (or
 * be an engine's text), so it is logged and answered as a bare 500.
 */
import type { FastifyReply, FastifyRequest } from 'fastify'
import { TritonError } from '../errors'
import { HTTP_STATUS } from './http-status'

const isErrorStatus = (status: unknown): status is number =>
  Number.isInteger(status) && (status as number) >= 400 && (status as number) <= 599

/** The HTTP status an error is answered with, or undefined for one whose message must not be sent. */
export function httpStatusOf (error: unknown): number | undefined {
  if (error instanceof TritonError) return HTTP_STATUS[error.kind]
  const status = (error as { statusCode?: unknown } | null)?.statusCode
  return isErrorStatus(status) ? status : undefined
}

/** How long a client told the server is busy waits before it asks again (seconds). */
const RETRY_AFTER_SECONDS = '1'

/** Sends `{"error": message}` as JSON bytes: no serializer of the route can reshape it. */
const sendErrorBody = (reply: FastifyReply, message: string) =>
  reply.type('application/json').send(Buffer.from(JSON.stringify({ error: message })))

/** A Fastify error handler (`instance.setErrorHandler(kserveErrorHandler)`) answering `{"error": message}`. */
export function kserveErrorHandler (error: Error, request: FastifyRequest, reply: FastifyReply) {
  const status = httpStatusOf(error)
  if (status === undefined) {
    request.log.error({ err: error }, 'request failed')
    return sendErrorBody(reply.code(500), 'Internal Server Error')
  }
  if (error instanceof TritonError && error.kind === 'exhausted') reply.header('retry-after', RETRY_AFTER_SECONDS)
  return sendErrorBody(reply.code(status), error.message)
}
