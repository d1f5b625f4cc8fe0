/**
 * The plugin inside an app with the common Fastify plugins a host already runs: their answers pass
 * through with their status (no 500), their hooks' bodies are not reshaped by the routes' response
 * schemas, and their route hooks (rate limit) run before the API's gates, so guesses are throttled.
 */
import compress from '@fastify/compress'
import rateLimit from '@fastify/rate-limit'
import underPressure from '@fastify/under-pressure'
import Fastify, { type FastifyInstance, type InjectOptions, type LightMyRequestResponse } from 'fastify'
import t from 'tap'
import { gunzipSync } from 'node:zlib'
import fastifyTritonShm, { type FastifyTritonShmOptions } from '../lib/index'
import { registerBody, SYSTEM } from './helpers/app'
import { assertEmptySuccess, assertError } from './helpers/http'
import { LEVEL, LogCapture } from './helpers/observe'
import { makeObject, PAGE_SIZE } from './helpers/shm'

t.test('@fastify/under-pressure: an unhealthy service answers 503 with Retry-After, in the API shape, logged as no failure', async (t) => {
  const capture = new LogCapture()
  const app = Fastify({ logger: { level: 'info', stream: capture.stream } })
  t.teardown(() => app.close())
  await app.register(underPressure, { healthCheck: async () => false, healthCheckInterval: 60_000, retryAfter: 7 })
  await app.register(fastifyTritonShm)

  for (const url of [`${SYSTEM}/status`, `${SYSTEM}/region/r/status`]) {
    const response = await app.inject({ method: 'GET', url })
    assertError(t, response, 503, 'Service Unavailable')
    t.equal(response.headers['retry-after'], '7', "under-pressure's Retry-After is kept")
  }
  assertError(t, await app.inject({ method: 'POST', url: `${SYSTEM}/region/r/register`, payload: '{}' }), 503, 'Service Unavailable')
  t.notOk(capture.lines.some((line) => line.level >= LEVEL.error), 'a host plugin\'s deliberate answer is no error of the API')
})

t.test('a host hook\'s own body passes through the routes untouched', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  app.addHook('onRequest', async (request, reply) => {
    if (request.headers.authorization === undefined) return reply.code(401).send({ message: 'token required' })
  })
  await app.register(fastifyTritonShm)
  const key = makeObject(t, PAGE_SIZE)

  for (const [method, url] of [['GET', `${SYSTEM}/status`], ['GET', `${SYSTEM}/region/r/status`],
    ['POST', `${SYSTEM}/region/r/register`], ['POST', `${SYSTEM}/region/r/unregister`], ['POST', `${SYSTEM}/unregister`]] as const) {
    const response = await app.inject({ method, url })
    t.equal(response.statusCode, 401, `${method} ${url}`)
    t.same(response.json(), { message: 'token required' }, `${method} ${url}: the hook's body, not {}`)
  }
  const authorized = { authorization: 'Bearer x' }
  assertEmptySuccess(t, await app.inject({ method: 'POST', url: `${SYSTEM}/region/r/register`, headers: authorized, payload: registerBody(key, 64) }))
  const status = await app.inject({ method: 'GET', url: `${SYSTEM}/status`, headers: authorized })
  t.same(status.json(), [{ name: 'r', key, offset: 0, byte_size: 64 }], 'the API\'s own answers are unchanged')
  assertError(t, await app.inject({ method: 'GET', url: `${SYSTEM}/region/none/status`, headers: authorized }), 404,
    "Unable to find system shared memory region: 'none'")
})

t.test('@fastify/rate-limit registered first throttles guesses at every gate', async (t) => {
  const build = async (options: FastifyTritonShmOptions) => {
    const app = Fastify()
    t.teardown(() => app.close())
    await app.register(rateLimit, { max: 3, timeWindow: '1 minute' })
    await app.register(fastifyTritonShm, options)
    return app
  }
  const twentyTimes = async (app: FastifyInstance, request: InjectOptions) => {
    const answers: LightMyRequestResponse[] = []
    for (let attempt = 0; attempt < 20; attempt++) answers.push(await app.inject(request))
    return answers
  }

  const restricted = await build({ restrictedApi: { header: 'x-api-key', value: 'secret' } })
  const guesses = await twentyTimes(restricted, { method: 'GET', url: `${SYSTEM}/status`, headers: { 'x-api-key': 'guess' } })
  t.same(guesses.map((response) => response.statusCode), [...Array(3).fill(403), ...Array(17).fill(429)],
    'three wrong-header guesses get 403, then the rate limit answers')
  assertError(t, guesses[3], 429, /^Rate limit exceeded/)
  t.ok(guesses[3].headers['retry-after'] !== undefined, "rate-limit's headers are kept")

  const disabled = await build({ allowClientShm: false })
  const registers = await twentyTimes(disabled, { method: 'POST', url: `${SYSTEM}/region/r/register`, payload: '{}' })
  t.same(registers.map((response) => response.statusCode), [...Array(3).fill(501), ...Array(17).fill(429)],
    'the disabled switch is throttled too')

  const open = await build({})
  const wrongMethods = await twentyTimes(open, { method: 'DELETE', url: `${SYSTEM}/status` })
  t.same(wrongMethods.map((response) => response.statusCode), [...Array(3).fill(405), ...Array(17).fill(429)],
    'and so are wrong methods')
})

t.test('@fastify/compress registered first compresses the API\'s answers, which stay JSON', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(compress, { threshold: 0 })
  await app.register(fastifyTritonShm)
  const key = makeObject(t, PAGE_SIZE)
  assertEmptySuccess(t, await app.inject({ method: 'POST', url: `${SYSTEM}/region/r/register`, payload: registerBody(key, 64) }))

  const status = await app.inject({ method: 'GET', url: `${SYSTEM}/status`, headers: { 'accept-encoding': 'gzip' } })
  t.equal(status.statusCode, 200)
  t.equal(status.headers['content-encoding'], 'gzip')
  t.equal(status.headers['content-type'], 'application/json')
  t.same(JSON.parse(gunzipSync(status.rawPayload).toString()), [{ name: 'r', key, offset: 0, byte_size: 64 }])
  const missing = await app.inject({ method: 'GET', url: `${SYSTEM}/region/none/status`, headers: { 'accept-encoding': 'gzip' } })
  t.equal(missing.statusCode, 404)
  t.same(JSON.parse(gunzipSync(missing.rawPayload).toString()), { error: "Unable to find system shared memory region: 'none'" })
})
