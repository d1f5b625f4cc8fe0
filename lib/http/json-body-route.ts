/**
 * Routes whose whole body is one JSON object (the generate extension's), marked in their route
 * config: the infer body parser reads no binary section after it, whatever
 * `Inference-Header-Content-Length` says, and refuses a body past `jsonLimit` (Triton's
 * `--http-max-input-size`) in Triton's words before reading it.
 */
import type { FastifyRequest } from 'fastify'

const JSON_BODY = 'fastifyTritonShmJsonBody'

/** The route config that marks such a route. */
export const JSON_BODY_CONFIG: Readonly<Record<string, unknown>> = Object.freeze({ [JSON_BODY]: true })

/** Whether `request` is for such a route. */
export const isJsonBodyRoute = (request: FastifyRequest): boolean =>
  (request.routeOptions.config as unknown as Record<string, unknown>)[JSON_BODY] === true
