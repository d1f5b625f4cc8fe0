/**
 * URLs Fastify's router cannot decode (`/region/%ZZ/register`) are answered by Fastify before any
 * plugin sees them; with `frameworkErrors: apiFrameworkErrors()` the API's paths get its
 * `{"error"}` shape, and other paths keep the host's answer. Over inject and over a real socket
 * (the path sent byte for byte, as no client library would normalize it).
 */
import type { AddressInfo } from 'node:net'
import Fastify, { type FastifyServerOptions } from 'fastify'
import t, { type Test } from 'tap'
import fastifyTritonShm, { apiFrameworkErrors } from '../lib/index'
import { SYSTEM } from './helpers/app'
import { assertError, rawRequest } from './helpers/http'

const MALFORMED = 'the request path is not valid percent-encoding: encode region names as Python\'s urllib.parse.quote does'

const API_PATHS = [
  ['POST', `${SYSTEM}/region/%ZZ/register`],
  ['GET', `${SYSTEM}/region/%E0%A4%A/status`],
  ['POST', `/triton${SYSTEM}/region/bad%/unregister`],
  ['POST', '/v2/cudasharedmemory/region/%zz/register'],
  ['GET', `${SYSTEM}/%ZZ`]
] as const

async function buildApp (t: Test, serverOptions: FastifyServerOptions) {
  const app = Fastify(serverOptions)
  t.teardown(() => app.close())
  await app.register(fastifyTritonShm)
  await app.register(fastifyTritonShm, { prefix: '/triton', decorator: 'prefixedShm' })
  app.get('/other/:name', async () => 'ok')
  return app
}

t.test('over inject: malformed percent-encoding under the API answers 400 in its shape; other paths keep Fastify\'s', async (t) => {
  const app = await buildApp(t, { frameworkErrors: apiFrameworkErrors() })
  for (const [method, url] of API_PATHS) {
    const response = await app.inject({ method, url, payload: '{}' })
    assertError(t, response, 400, MALFORMED)
  }
  const other = await app.inject({ method: 'GET', url: '/other/%ZZ' })
  t.equal(other.statusCode, 400)
  t.match(other.json(), { code: 'FST_ERR_BAD_URL', error: 'Bad Request' }, 'the host\'s paths keep Fastify\'s own answer')
  t.same(app.systemSharedMemory.status(), [], 'nothing was registered')
})

t.test('over a real socket: the same answers', async (t) => {
  const app = await buildApp(t, { frameworkErrors: apiFrameworkErrors() })
  await app.listen({ host: '127.0.0.1', port: 0 })
  const { port } = app.server.address() as AddressInfo
  for (const [method, path] of API_PATHS) {
    const response = await rawRequest(port, method, path, {}, '{}')
    t.equal(response.statusCode, 400, `${method} ${path}`)
    t.equal(response.headers['content-type'], 'application/json')
    t.same(JSON.parse(response.body), { error: MALFORMED })
  }
  const other = await rawRequest(port, 'GET', '/other/%ZZ')
  t.match(JSON.parse(other.body), { code: 'FST_ERR_BAD_URL' })
})

t.test('the host\'s own frameworkErrors still answers every other path', async (t) => {
  const app = await buildApp(t, {
    frameworkErrors: apiFrameworkErrors((error, _request, reply) => { reply.code(400).send({ hostSays: error.code }) })
  })
  assertError(t, await app.inject({ method: 'POST', url: `${SYSTEM}/region/%ZZ/register` }), 400, MALFORMED)
  const other = await app.inject({ method: 'GET', url: '/other/%ZZ' })
  t.same(other.json(), { hostSays: 'FST_ERR_BAD_URL' })
})

t.test('other framework errors under the API keep their status, in the API shape', async (t) => {
  // A parameter over maxParamLength, on a host route under an API-looking path that no route of the
  // API matches: Fastify's router answers it (FST_ERR_MAX_PARAM_LENGTH, 414).
  const app = Fastify({ frameworkErrors: apiFrameworkErrors() })
  t.teardown(() => app.close())
  app.get('/host/v2/systemsharedmemory/:name', async () => 'ok')
  const response = await app.inject({ method: 'GET', url: `/host/v2/systemsharedmemory/${'n'.repeat(150)}` })
  assertError(t, response, 414, /exceeding the max param length/)
})
