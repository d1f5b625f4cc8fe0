/**
 * The plugin under the host's Fastify settings: `exposeHeadRoutes: false`, two registrations in one
 * OpenAPI document, Fastify's `logLevel` register option, and `maxParamLength`. (A custom
 * `decorator` name is typed by the user's `declare module`: test/types/plugin.tst.ts.)
 */
import swagger from '@fastify/swagger'
import Fastify from 'fastify'
import t from 'tap'
import fastifyTritonShm from '../lib/index'
import { buildApp, registerBody, SYSTEM } from './helpers/app'
import { assertEmptySuccess, assertError } from './helpers/http'
import { LEVEL, LogCapture, REFUSED, REGISTERED } from './helpers/observe'
import { makeObject, PAGE_SIZE } from './helpers/shm'

t.test('with exposeHeadRoutes: false, HEAD is still served, as Allow says', async (t) => {
  const app = await buildApp(t, {}, { exposeHeadRoutes: false })
  for (const url of [`${SYSTEM}/status`, `${SYSTEM}/region/none/status`, '/v2/cudasharedmemory/status']) {
    const get = await app.inject({ method: 'GET', url })
    const head = await app.inject({ method: 'HEAD', url })
    t.equal(head.statusCode, get.statusCode, `HEAD ${url} answers as GET does`)
    t.equal(head.body, '', 'with no body')
    t.equal(head.headers['content-type'], 'application/json')
  }
  const wrongMethod = await app.inject({ method: 'POST', url: `${SYSTEM}/status` })
  assertError(t, wrongMethod, 405, 'Method Not Allowed')
  t.equal(wrongMethod.headers.allow, 'GET, HEAD')
})

t.test('two registrations in one app publish distinct operationIds with openapi.operationIdPrefix', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(swagger, { openapi: { info: { title: 'host', version: '1.0.0' } } })
  await app.register(fastifyTritonShm, { prefix: '/a' })
  await app.register(fastifyTritonShm, { prefix: '/b', decorator: 'replicaShm', openapi: { operationIdPrefix: 'replica_' } })
  await app.ready()
  const document = app.swagger() as { paths: Record<string, Record<string, { operationId?: string }>> }
  const ids = Object.values(document.paths).flatMap((operations) => Object.values(operations).map((operation) => operation.operationId))
  t.equal(ids.length, 20, 'ten operations each')
  t.equal(new Set(ids).size, ids.length, 'no operationId twice')
  t.equal(document.paths['/a/v2/systemsharedmemory/status'].get.operationId, 'systemSharedMemoryStatus', 'the first keeps the seed\'s ids')
  t.equal(document.paths['/b/v2/systemsharedmemory/status'].get.operationId, 'replica_systemSharedMemoryStatus')
  t.equal(document.paths['/b/v2/cudasharedmemory/region/{region_name}/register'].post.operationId, 'replica_cudaSharedMemoryRegister')
})

t.test('the logLevel register option applies to the routes and the registry', async (t) => {
  const capture = new LogCapture()
  const app = Fastify({ logger: { level: 'info', stream: capture.stream } })
  t.teardown(() => app.close())
  await app.register(fastifyTritonShm, { logLevel: 'warn', prefix: '/quiet' })
  await app.register(fastifyTritonShm, { logLevel: 'debug', prefix: '/verbose', decorator: 'verboseShm' })
  app.get('/host', async () => 'ok')
  const key = makeObject(t, PAGE_SIZE)

  assertEmptySuccess(t, await app.inject({ method: 'POST', url: `/quiet${SYSTEM}/region/q/register`, payload: registerBody(key, 64) }))
  t.same(capture.lines, [], 'at warn: neither the request nor the registration is logged')
  t.equal(app.systemSharedMemory.status('q').length, 1)

  await app.inject({ method: 'GET', url: '/host' })
  t.ok(capture.lines.some((line) => line.msg === 'incoming request' && (line.req as { url: string }).url === '/host'),
    'the host\'s own routes keep the app\'s level')

  capture.lines.length = 0
  await app.inject({ method: 'POST', url: `/verbose${SYSTEM}/region/v/register`, payload: '{}' })
  t.ok(capture.lines.some((line) => line.level === LEVEL.debug && line.msg === REFUSED), 'at debug: refusals are logged')
  t.ok(capture.lines.some((line) => line.msg === 'incoming request'), 'and requests, as the app logs them')
  capture.lines.length = 0
  assertEmptySuccess(t, await app.inject({ method: 'POST', url: `/verbose${SYSTEM}/region/v/register`, payload: registerBody(key, 64) }))
  t.ok(capture.lines.some((line) => line.level === LEVEL.info && line.msg === REGISTERED), 'and registrations at info')
})

t.test('a region name longer than maxParamLength gets a message saying what to raise', async (t) => {
  const longName = 'n'.repeat(150)
  const app = await buildApp(t)
  for (const [method, action] of [['GET', 'status'], ['POST', 'register'], ['POST', 'unregister']] as const) {
    const response = await app.inject({ method, url: `${SYSTEM}/region/${longName}/${action}`, payload: '{}' })
    assertError(t, response, 414,
      "the region name is longer than this server accepts: raise Fastify's server option 'maxParamLength' (default 100)")
  }
  assertError(t, await app.inject({ method: 'GET', url: `${SYSTEM}/region/${longName}/other` }), 404, 'Not Found')

  const raised = await buildApp(t, {}, { routerOptions: { maxParamLength: 200 } })
  const key = makeObject(t, PAGE_SIZE)
  assertEmptySuccess(t, await raised.inject({ method: 'POST', url: `${SYSTEM}/region/${longName}/register`, payload: registerBody(key, 64) }))
  t.equal(raised.systemSharedMemory.status(longName).length, 1, 'raised, the name registers')
})
