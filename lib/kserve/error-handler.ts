/**
 * The KServe error shape, `{"error": <message>}`, as an error handler for inference routes (and
 * the shared memory API's own routes). An error that carries an HTTP status keeps it and its
 * message: this package's errors, Fastify's (body too large...), a host plugin's (rate limit 429,
 * under-pressure 503). An error without one is a bug: its message may name internals (or be an
 * engine's text), so it is logged and answered as a bare 500.
 */
import type { FastifyReply, FastifyRequest } from 'fastify'

const isErrorStatus = (status: unknown): status is number =>
  Number.isInteger(status) && (status as number) >= 400 && (status as number) <= 599

/** Sends `{"error": message}` as JSON bytes: no serializer of the route can reshape it. */
const sendErrorBody = (reply: FastifyReply, message: string) =>
  reply.type('application/json').send(Buffer.from(JSON.stringify({ error: message })))

/** A Fastify error handler (`instance.setErrorHandler(kserveErrorHandler)`) answering `{"error": message}`. */
export function kserveErrorHandler (error: Error & { statusCode?: unknown }, request: FastifyRequest, reply: FastifyReply) {
  if (!isErrorStatus(error.statusCode)) {
    request.log.error({ err: error }, 'request failed')
    return sendErrorBody(reply.code(500), 'Internal Server Error')
  }
  return sendErrorBody(reply.code(error.statusCode), error.message)
}
