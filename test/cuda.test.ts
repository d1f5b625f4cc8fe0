/**
 * SPEC section 6: the CUDA shared memory routes, answered as Triton answers on a server without
 * GPUs, and never touching the system shared memory regions.
 */
import type { FastifyInstance, HTTPMethods } from 'fastify'
import t, { type Test } from 'tap'
import { buildApp, CUDA, registerBody, SYSTEM } from './helpers/app'
import { assertEmptySuccess, assertError } from './helpers/http'
import { makeObject, PAGE_SIZE } from './helpers/shm'

/** An app with two system regions, 'a' and 'b', that no CUDA route may see or change. */
async function appWithSystemRegions (t: Test) {
  const app = await buildApp(t)
  const key = makeObject(t, PAGE_SIZE)
  app.systemSharedMemory.register('a', { key, byteSize: 16 })
  app.systemSharedMemory.register('b', { key, byteSize: 32 })
  return app
}

const systemNames = (app: FastifyInstance) => app.systemSharedMemory.status().map((region) => region.name)

/** A register body as Triton's CUDA clients send it. */
const cudaRegisterBody = JSON.stringify({ raw_handle: { b64: Buffer.alloc(64).toString('base64') }, device_id: 0, byte_size: 64 })

t.test('status is [], even with system regions registered', async (t) => {
  const app = await appWithSystemRegions(t)
  const response = await app.inject({ method: 'GET', url: `${CUDA}/status` })
  t.equal(response.statusCode, 200)
  t.equal(response.headers['content-type'], 'application/json')
  t.equal(response.body, '[]')
  const head = await app.inject({ method: 'HEAD', url: `${CUDA}/status` })
  t.equal(head.statusCode, 200)
})

t.test('region status is 404, also for the name of a system region', async (t) => {
  const app = await appWithSystemRegions(t)
  for (const name of ['unknown', 'a']) {
    const response = await app.inject({ method: 'GET', url: `${CUDA}/region/${name}/status` })
    assertError(t, response, 404, `Unable to find cuda shared memory region: '${name}'`)
  }
})

t.test('register is 400 "GPUs not supported", whatever the body', async (t) => {
  const app = await appWithSystemRegions(t)
  const key = makeObject(t, PAGE_SIZE)
  for (const payload of [cudaRegisterBody, registerBody(key, 16), undefined]) {
    for (const name of ['gpu', 'a', 'with space']) {
      const response = await app.inject({ method: 'POST', url: `${CUDA}/region/${encodeURIComponent(name)}/register`, payload })
      assertError(t, response, 400, `failed to register CUDA shared memory region: '${name}', GPUs not supported`)
    }
  }
  t.same(systemNames(app), ['a', 'b'], 'no system region registered')
})

t.test('register without a region name is 400, in Triton\'s CUDA words', async (t) => {
  const app = await buildApp(t)
  const response = await app.inject({ method: 'POST', url: `${CUDA}/register`, payload: cudaRegisterBody })
  assertError(t, response, 400, "'region name' is necessary to register cuda shared memory region")
})

t.test('unregister is 200 and leaves system regions of the same name alone', async (t) => {
  const app = await appWithSystemRegions(t)
  for (const name of ['unknown', 'a']) {
    assertEmptySuccess(t, await app.inject({ method: 'POST', url: `${CUDA}/region/${name}/unregister` }))
  }
  t.same(systemNames(app), ['a', 'b'])
})

t.test('unregister-all is 200 (Triton\'s example client dies otherwise) and leaves system regions alone', async (t) => {
  const app = await appWithSystemRegions(t)
  assertEmptySuccess(t, await app.inject({ method: 'POST', url: `${CUDA}/unregister` }))
  assertEmptySuccess(t, await app.inject({
    method: 'POST', url: `${CUDA}/unregister`, headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: ''
  }))
  t.same(systemNames(app), ['a', 'b'])
  const status = await app.inject({ method: 'GET', url: `${SYSTEM}/status` })
  t.equal(status.json().length, 2)
})

t.test('the same route shapes: 405 with Allow for a wrong method', async (t) => {
  const app = await buildApp(t)
  const cases: Array<[HTTPMethods, string, string]> = [
    ['POST', `${CUDA}/status`, 'GET, HEAD'],
    ['PUT', `${CUDA}/region/r/status`, 'GET, HEAD'],
    ['GET', `${CUDA}/region/r/register`, 'POST'],
    ['DELETE', `${CUDA}/region/r/unregister`, 'POST'],
    ['GET', `${CUDA}/unregister`, 'POST'],
    ['PATCH', `${CUDA}/register`, 'POST']
  ]
  for (const [method, url, allow] of cases) {
    const response = await app.inject({ method, url })
    assertError(t, response, 405, 'Method Not Allowed')
    t.equal(response.headers.allow, allow, `${method} ${url}`)
  }
})
