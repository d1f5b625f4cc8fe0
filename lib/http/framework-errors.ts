/**
 * Fastify's router answers a URL it cannot decode (`/region/%ZZ/register`) itself, before any
 * plugin, hook or route sees the request, in Fastify's error shape. Only the server option
 * `frameworkErrors` reaches that answer: this handler gives the API's paths (under any prefix)
 * their `{"error"}` shape, and leaves every other path to the host's answer.
 */
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify'
import * as errors from '../errors'
import { kserveErrorHandler } from './error-handler'

export type FrameworkErrorsHandler = (error: FastifyError, request: FastifyRequest, reply: FastifyReply) => void

const API_PATH = /\/v2\/(system|cuda)sharedmemory(\/|\?|$)/

/** What Fastify answers without `frameworkErrors`: the error in its default shape. */
const fastifyAnswer: FrameworkErrorsHandler = (error, _request, reply) => { reply.send(error) }

/** A `frameworkErrors` server option: `Fastify({ frameworkErrors: apiFrameworkErrors(hostHandler?) })`. */
export function apiFrameworkErrors (otherPaths: FrameworkErrorsHandler = fastifyAnswer): FrameworkErrorsHandler {
  return (error, request, reply) => {
    if (!API_PATH.test(request.url)) return otherPaths(error, request, reply)
    kserveErrorHandler(error.code === 'FST_ERR_BAD_URL' ? errors.malformedPath() : error, request, reply)
  }
}
