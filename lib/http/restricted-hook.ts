/**
 * Triton's `--http-restricted-api` over HTTP: a hook that refuses (403) a call to a restricted
 * category without its header. It runs at preParsing: after the host's own hooks (rate limits,
 * auth), which Fastify runs at onRequest, and before a byte of the body is read.
 */
import type { FastifyRequest, preParsingHookHandler } from 'fastify'
import type { RestrictedCategory } from '../../types'
import type { RestrictedFeatures } from '../util/restricted-features'

/** The value of a request's header (Node joins a header sent twice into one value). */
export function headerOf (request: FastifyRequest, lowerCaseName: string): string | undefined {
  const sent = request.headers[lowerCaseName]
  return typeof sent === 'string' ? sent : undefined
}

/** The hook for routes whose category `categoryOf` tells (undefined: a route no category covers). */
export function restrictedHook (restrictions: RestrictedFeatures,
  categoryOf: (request: FastifyRequest) => RestrictedCategory | undefined): preParsingHookHandler {
  return async (request) => {
    const category = categoryOf(request)
    if (category !== undefined) restrictions.check(category, (name) => headerOf(request, name))
  }
}
