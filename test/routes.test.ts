/**
 * SPEC section 1: the routes, their success and error shapes, methods, path decoding, bodies
 * without a Content-Type, the wire format over a real socket, and the prefix option.
 */
import type { AddressInfo } from 'node:net'
import Fastify, { type FastifyInstance, type HTTPMethods } from 'fastify'
import t from 'tap'
import fastifyTritonShm from '../lib/index'
import { buildApp, CUDA, registerBody, SYSTEM } from './helpers/app'
import { assertEmptySuccess, assertError, rawRequest, register } from './helpers/http'
import { makeObject } from './helpers/shm'

/** `{"name","key","offset","byte_size"}` written out by hand: the field order is part of the contract. */
const statusJson = (name: string, key: string, offset: number, byteSize: number) =>
  `{"name":${JSON.stringify(name)},"key":${JSON.stringify(key)},"offset":${offset},"byte_size":${byteSize}}`

const names = (app: FastifyInstance) => app.systemSharedMemory.status().map((region) => region.name)

t.test('GET status', async (t) => {
  t.test('answers [] when no region is registered', async (t) => {
    const app = await buildApp(t)
    const response = await app.inject({ method: 'GET', url: `${SYSTEM}/status` })
    t.equal(response.statusCode, 200)
    t.equal(response.headers['content-type'], 'application/json')
    t.equal(response.body, '[]')
  })

  t.test('lists every region sorted by name, fields in the order name, key, offset, byte_size', async (t) => {
    const app = await buildApp(t)
    const key = makeObject(t, 8192)
    for (const [name, offset, byteSize] of [['b', 0, 64], ['a b', 100, 28], ['C', 4096, 4096], ['a', 1, 1]] as const) {
      assertEmptySuccess(t, await register(app, name, key, byteSize, offset))
    }
    const response = await app.inject({ method: 'GET', url: `${SYSTEM}/status` })
    t.equal(response.statusCode, 200)
    t.equal(response.headers['content-type'], 'application/json')
    t.equal(response.body, `[${[
      statusJson('C', key, 4096, 4096),
      statusJson('a', key, 1, 1),
      statusJson('a b', key, 100, 28),
      statusJson('b', key, 0, 64)
    ].join(',')}]`)
  })

  t.test('echoes each key exactly as registered, leading slashes kept', async (t) => {
    const app = await buildApp(t)
    const key = makeObject(t, 4096)
    const bare = key.replace(/^\/+/, '')
    for (const [name, sent] of [['one', key], ['two', `//${bare}`], ['three', bare]]) {
      assertEmptySuccess(t, await register(app, name, sent, 16))
    }
    const response = await app.inject({ method: 'GET', url: `${SYSTEM}/status` })
    t.equal(response.body, `[${[
      statusJson('one', key, 0, 16),
      statusJson('three', bare, 0, 16),
      statusJson('two', `//${bare}`, 0, 16)
    ].join(',')}]`)
  })
})

t.test('GET region/<name>/status', async (t) => {
  t.test('answers an array with the one region', async (t) => {
    const app = await buildApp(t)
    const key = makeObject(t, 4096)
    await register(app, 'first', key, 32, 8)
    await register(app, 'second', key, 64)
    const response = await app.inject({ method: 'GET', url: `${SYSTEM}/region/second/status` })
    t.equal(response.statusCode, 200)
    t.equal(response.headers['content-type'], 'application/json')
    t.equal(response.body, `[${statusJson('second', key, 0, 64)}]`)
  })

  t.test('answers 404 for an unknown name', async (t) => {
    const app = await buildApp(t)
    const key = makeObject(t, 4096)
    await register(app, 'known', key, 32)
    const response = await app.inject({ method: 'GET', url: `${SYSTEM}/region/unknown/status` })
    assertError(t, response, 404, "Unable to find system shared memory region: 'unknown'")
  })
})

t.test('POST region/<name>/register answers 200 with an empty JSON body and registers', async (t) => {
  const app = await buildApp(t)
  const key = makeObject(t, 4096)
  assertEmptySuccess(t, await register(app, 'r', key, 128, 64))
  t.same(app.systemSharedMemory.status(), [{ name: 'r', key, offset: 64, byte_size: 128 }])
})

t.test('POST region/<name>/unregister', async (t) => {
  t.test('removes the region, 200 with an empty JSON body', async (t) => {
    const app = await buildApp(t)
    const key = makeObject(t, 4096)
    await register(app, 'gone', key, 16)
    await register(app, 'kept', key, 16)
    assertEmptySuccess(t, await app.inject({ method: 'POST', url: `${SYSTEM}/region/gone/unregister` }))
    t.same(names(app), ['kept'])
  })

  t.test('of an unknown name is a 200 no-op', async (t) => {
    const app = await buildApp(t)
    const key = makeObject(t, 4096)
    await register(app, 'kept', key, 16)
    assertEmptySuccess(t, await app.inject({ method: 'POST', url: `${SYSTEM}/region/never-registered/unregister` }))
    t.same(names(app), ['kept'])
  })
})

t.test('a region waiting for deferred unregister is listed like any other', async (t) => {
  const app = await buildApp(t)
  const key = makeObject(t, 4096)
  await register(app, 'busy', key, 16)
  const lease = app.systemSharedMemory.acquire('busy', 0, 16)
  assertEmptySuccess(t, await app.inject({ method: 'POST', url: `${SYSTEM}/region/busy/unregister` }))
  const status = await app.inject({ method: 'GET', url: `${SYSTEM}/status` })
  t.equal(status.body, `[${statusJson('busy', key, 0, 16)}]`)
  const regionStatus = await app.inject({ method: 'GET', url: `${SYSTEM}/region/busy/status` })
  t.equal(regionStatus.body, `[${statusJson('busy', key, 0, 16)}]`)
  lease.release()
  t.equal((await app.inject({ method: 'GET', url: `${SYSTEM}/status` })).body, '[]', 'gone once its last lease ends')
})

t.test('POST unregister removes every region', async (t) => {
  const app = await buildApp(t)
  const key = makeObject(t, 4096)
  for (const name of ['a', 'b', 'c']) await register(app, name, key, 16)
  assertEmptySuccess(t, await app.inject({ method: 'POST', url: `${SYSTEM}/unregister` }))
  t.same(app.systemSharedMemory.status(), [])
  const status = await app.inject({ method: 'GET', url: `${SYSTEM}/status` })
  t.equal(status.body, '[]')
  assertEmptySuccess(t, await app.inject({ method: 'POST', url: `${SYSTEM}/unregister` }))
})

t.test('POST register without a region name is 400, whatever the body', async (t) => {
  const app = await buildApp(t)
  const key = makeObject(t, 4096)
  for (const payload of [undefined, registerBody(key, 16)]) {
    const response = await app.inject({ method: 'POST', url: `${SYSTEM}/register`, payload })
    assertError(t, response, 400, "'region name' is necessary to register system shared memory region")
  }
  t.same(app.systemSharedMemory.status(), [])
})

t.test('a wrong method is 405 {"error":"Method Not Allowed"} with an Allow header', async (t) => {
  const app = await buildApp(t)
  const key = makeObject(t, 4096)
  await register(app, 'r', key, 16)
  const before = app.systemSharedMemory.status()
  const cases: Array<[HTTPMethods[], string, string]> = [
    [['POST', 'PUT', 'DELETE', 'PATCH'], `${SYSTEM}/status`, 'GET, HEAD'],
    [['POST', 'PUT', 'DELETE', 'PATCH'], `${SYSTEM}/region/r/status`, 'GET, HEAD'],
    [['GET', 'PUT', 'DELETE', 'PATCH'], `${SYSTEM}/region/r/register`, 'POST'],
    [['GET', 'PUT', 'DELETE', 'PATCH'], `${SYSTEM}/region/r/unregister`, 'POST'],
    [['GET', 'PUT', 'DELETE', 'PATCH'], `${SYSTEM}/unregister`, 'POST'],
    [['GET', 'PUT', 'DELETE', 'PATCH'], `${SYSTEM}/register`, 'POST']
  ]
  for (const [methods, url, allow] of cases) {
    for (const method of methods) {
      // A valid register body: a wrong method must not register (or unregister) anything.
      const response = await app.inject({ method, url, payload: registerBody(key, 16) })
      t.equal(response.statusCode, 405, `${method} ${url}`)
      t.equal(response.body, '{"error":"Method Not Allowed"}', `${method} ${url} body`)
      t.equal(response.headers['content-type'], 'application/json', `${method} ${url} content type`)
      t.equal(response.headers.allow, allow, `${method} ${url} Allow`)
    }
  }
  t.same(app.systemSharedMemory.status(), before, 'no region changed')
})

t.test('HEAD on a path that serves POST is 405 too, with no body', async (t) => {
  const app = await buildApp(t)
  const response = await app.inject({ method: 'HEAD', url: `${SYSTEM}/region/r/register` })
  t.equal(response.statusCode, 405)
  t.equal(response.headers.allow, 'POST')
  t.equal(response.body, '')
})

t.test('a wrong method wins over a body that is not JSON or is too large', async (t) => {
  const app = await buildApp(t)
  for (const payload of ['{"key":', 'x'.repeat(128 * 1024)]) {
    const response = await app.inject({
      method: 'POST', url: `${SYSTEM}/status`, headers: { 'content-type': 'application/json' }, payload
    })
    assertError(t, response, 405, 'Method Not Allowed')
    t.equal(response.headers.allow, 'GET, HEAD')
  }
})

t.test('HEAD on status works', async (t) => {
  const app = await buildApp(t)
  const key = makeObject(t, 4096)
  await register(app, 'r', key, 16)
  for (const url of [`${SYSTEM}/status`, `${SYSTEM}/region/r/status`]) {
    const response = await app.inject({ method: 'HEAD', url })
    t.equal(response.statusCode, 200, url)
    t.equal(response.headers['content-type'], 'application/json', `${url} content type`)
    t.equal(response.body, '', `${url} has no body`)
  }
  const unknown = await app.inject({ method: 'HEAD', url: `${SYSTEM}/region/nope/status` })
  t.equal(unknown.statusCode, 404)
})

t.test('region names are the percent-decoded path segment', async (t) => {
  const app = await buildApp(t)
  const key = makeObject(t, 4096)
  const cases: Array<[string, string]> = [
    ['with%20space', 'with space'], // Python's quote
    ['with+plus', 'with+plus'], // Go's QueryEscape turns a space into '+': the name keeps the '+'
    ['%2B', '+'],
    [encodeURIComponent('région-π-名前'), 'région-π-名前'],
    ['a%2Fb', 'a/b'], // a slash inside a name
    ['100%25', '100%']
  ]
  for (const [segment, name] of cases) {
    assertEmptySuccess(t, await app.inject({
      method: 'POST', url: `${SYSTEM}/region/${segment}/register`, payload: registerBody(key, 16)
    }))
    t.ok(app.systemSharedMemory.has(name), `'${segment}' registers '${name}'`)
    const status = await app.inject({ method: 'GET', url: `${SYSTEM}/region/${segment}/status` })
    t.equal(status.body, `[${statusJson(name, key, 0, 16)}]`, `'${segment}' status`)
  }
  t.same(names(app).sort(), cases.map(([, name]) => name).sort(), 'exactly the decoded names')
  for (const [segment, name] of cases) {
    assertEmptySuccess(t, await app.inject({ method: 'POST', url: `${SYSTEM}/region/${segment}/unregister` }))
    t.notOk(app.systemSharedMemory.has(name), `'${segment}' unregisters '${name}'`)
  }
})

t.test('an empty region segment is no route: 404 with an {"error"} body, whatever the method or body', async (t) => {
  const app = await buildApp(t)
  const key = makeObject(t, 4096)
  const cases: Array<[HTTPMethods, string, string | undefined]> = [
    ['POST', `${SYSTEM}/region//register`, registerBody(key, 16)],
    ['POST', `${SYSTEM}/region//register`, undefined],
    ['POST', `${SYSTEM}/region//register`, '{not json'],
    ['GET', `${SYSTEM}/region//register`, undefined],
    ['GET', `${SYSTEM}/region//status`, undefined],
    ['PUT', `${SYSTEM}/region//status`, undefined],
    ['POST', `${SYSTEM}/region//unregister`, undefined],
    ['POST', `${CUDA}/region//register`, undefined],
    ['GET', `${CUDA}/region//status`, undefined]
  ]
  for (const [method, url, payload] of cases) {
    assertError(t, await app.inject({ method, url, payload }), 404)
  }
  t.same(app.systemSharedMemory.status(), [], 'nothing registered')
})

t.test('POSTs with no Content-Type and no body work', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  const contentTypes: Array<string | undefined> = []
  app.addHook('onRequest', async (request) => { contentTypes.push(request.headers['content-type']) })
  await app.register(fastifyTritonShm)
  const key = makeObject(t, 4096)
  for (const name of ['a', 'b']) {
    assertEmptySuccess(t, await app.inject({ method: 'POST', url: `${SYSTEM}/region/${name}/register`, payload: registerBody(key, 16) }))
  }
  assertEmptySuccess(t, await app.inject({ method: 'POST', url: `${SYSTEM}/region/a/unregister` }))
  t.same(names(app), ['b'])
  assertEmptySuccess(t, await app.inject({ method: 'POST', url: `${SYSTEM}/unregister` }))
  t.same(names(app), [])
  assertEmptySuccess(t, await app.inject({ method: 'POST', url: `${CUDA}/unregister` }))
  t.same(contentTypes, [undefined, undefined, undefined, undefined, undefined], 'no request carried a Content-Type')
})

t.test('unregister POSTs with a Content-Type and an empty body work (libcurl, Triton\'s C++ client)', async (t) => {
  const app = await buildApp(t)
  const key = makeObject(t, 4096)
  for (const contentType of ['application/x-www-form-urlencoded', 'application/json']) {
    await register(app, 'r', key, 16)
    const headers = { 'content-type': contentType, 'content-length': '0' }
    assertEmptySuccess(t, await app.inject({ method: 'POST', url: `${SYSTEM}/region/r/unregister`, headers, payload: '' }))
    t.notOk(app.systemSharedMemory.has('r'), `${contentType}: unregistered`)
    await register(app, 'r', key, 16)
    assertEmptySuccess(t, await app.inject({ method: 'POST', url: `${SYSTEM}/unregister`, headers, payload: '' }))
    t.notOk(app.systemSharedMemory.has('r'), `${contentType}: unregistered all`)
  }
})

t.test('only register reads its body: unregister and CUDA register ignore theirs, as Triton does', async (t) => {
  const app = await buildApp(t)
  const key = makeObject(t, 4096)
  await register(app, 'r', key, 16)
  assertEmptySuccess(t, await app.inject({ method: 'POST', url: `${SYSTEM}/region/r/unregister`, payload: 'not json' }))
  t.notOk(app.systemSharedMemory.has('r'), 'unregistered')
  await register(app, 'r', key, 16)
  assertEmptySuccess(t, await app.inject({ method: 'POST', url: `${SYSTEM}/unregister`, payload: '{' }))
  t.notOk(app.systemSharedMemory.has('r'), 'unregistered all')
  assertError(t, await app.inject({ method: 'POST', url: `${CUDA}/region/c/register`, payload: '{' }), 400,
    "failed to register CUDA shared memory region: 'c', GPUs not supported")
})

t.test('any other path of the API is 404 in the API\'s error shape', async (t) => {
  const app = await buildApp(t)
  for (const url of [`${SYSTEM}/`, `${SYSTEM}/other`, `${SYSTEM}/status/`, `${SYSTEM}/region/r`, `${CUDA}/region/r/other`]) {
    for (const method of ['GET', 'POST', 'DELETE'] as const) {
      assertError(t, await app.inject({ method, url }), 404, 'Not Found')
    }
  }
  const hostMissing = await app.inject({ method: 'GET', url: '/v2/other' })
  t.equal(hostMissing.statusCode, 404, 'paths outside the API are the host\'s')
  t.match(JSON.parse(hostMissing.body), { statusCode: 404 }, 'answered in the host\'s own shape')
})

t.test('a register body is parsed as JSON whatever its Content-Type', async (t) => {
  const app = await buildApp(t)
  const key = makeObject(t, 4096)
  const contentTypes = ['text/plain', 'text/plain;charset=UTF-8', 'application/json', 'application/json; charset=utf-8',
    'application/octet-stream', 'application/x-www-form-urlencoded']
  for (const [index, contentType] of contentTypes.entries()) {
    const response = await app.inject({
      method: 'POST',
      url: `${SYSTEM}/region/r${index}/register`,
      headers: { 'content-type': contentType },
      payload: registerBody(key, 16 + index)
    })
    assertEmptySuccess(t, response)
    t.same(app.systemSharedMemory.status(`r${index}`), [{ name: `r${index}`, key, offset: 0, byte_size: 16 + index }],
      contentType)
  }
})

t.test('error bodies are exactly {"error": string}', async (t) => {
  t.test('a body that is not JSON is 400', async (t) => {
    const app = await buildApp(t)
    for (const [payload, contentType] of [['{"key":', undefined], ['key=a&byte_size=1', 'application/x-www-form-urlencoded'],
      ["{'key': 'a'}", 'application/json']]) {
      const response = await app.inject({
        method: 'POST',
        url: `${SYSTEM}/region/r/register`,
        headers: contentType === undefined ? {} : { 'content-type': contentType },
        payload
      })
      assertError(t, response, 400, 'Shared memory register request is invalid: the body is not valid JSON')
    }
    t.same(app.systemSharedMemory.status(), [])
  })

  t.test('a body over the limit is 413', async (t) => {
    const app = await buildApp(t)
    const key = makeObject(t, 4096)
    // A valid body padded to just under 64 KiB is read; one byte more is refused unread.
    const padded = (length: number) => registerBody(key, 16).replace('{', `{${' '.repeat(length - registerBody(key, 16).length)}`)
    assertEmptySuccess(t, await app.inject({ method: 'POST', url: `${SYSTEM}/region/fits/register`, payload: padded(64 * 1024) }))
    const response = await app.inject({ method: 'POST', url: `${SYSTEM}/region/big/register`, payload: padded(64 * 1024 + 1) })
    assertError(t, response, 413, 'Request body is too large')
    t.same(names(app), ['fits'])
  })

  t.test('Fastify\'s own client errors keep the shape', async (t) => {
    const app = await buildApp(t)
    const response = await app.inject({
      method: 'POST',
      url: `${SYSTEM}/region/r/register`,
      headers: { 'content-length': '1000' },
      payload: '{}'
    })
    assertError(t, response, 400)
  })

  t.test('an unexpected failure is 500 "Internal Server Error" and names nothing of it', async (t) => {
    const app = await buildApp(t)
    // No status, or one that is no error status: a bug, whose message may name internals.
    const failures: Error[] = [
      new Error('secret detail /dev/shm/some_object'),
      Object.assign(new Error('redirect detail'), { statusCode: 302 }),
      Object.assign(new Error('odd detail'), { statusCode: 600 })
    ]
    for (const failure of failures) {
      app.systemSharedMemory.status = () => { throw failure }
      const response = await app.inject({ method: 'GET', url: `${SYSTEM}/status` })
      t.equal(response.body, '{"error":"Internal Server Error"}', failure.message)
      assertError(t, response, 500, 'Internal Server Error')
    }
  })
})

t.test('over a real socket: JSON content type, empty success bodies, 405 with Allow', async (t) => {
  const app = await buildApp(t)
  await app.listen({ host: '127.0.0.1', port: 0 })
  const { port } = app.server.address() as AddressInfo
  const origin = `http://127.0.0.1:${port}`
  const key = makeObject(t, 4096)

  // node:http sends exactly the headers given: no Content-Type, as Triton's Python client.
  const raw = await rawRequest(port, 'POST', `${SYSTEM}/region/wire/register`, {}, registerBody(key, 32))
  t.equal(raw.statusCode, 200)
  t.equal(raw.headers['content-type'], 'application/json')
  t.equal(raw.headers['content-length'], '0')
  t.equal(raw.body, '')

  const status = await fetch(`${origin}${SYSTEM}/status`)
  t.equal(status.status, 200)
  t.equal(status.headers.get('content-type'), 'application/json')
  t.equal(await status.text(), `[${statusJson('wire', key, 0, 32)}]`)

  const wrongMethod = await fetch(`${origin}${SYSTEM}/status`, { method: 'DELETE' })
  t.equal(wrongMethod.status, 405)
  t.equal(wrongMethod.headers.get('allow'), 'GET, HEAD')
  t.equal(await wrongMethod.text(), '{"error":"Method Not Allowed"}')

  // libcurl's form content type with a length of 0, as Triton's C++ client unregisters.
  const unregister = await rawRequest(port, 'POST', `${SYSTEM}/region/wire/unregister`,
    { 'content-type': 'application/x-www-form-urlencoded', 'content-length': '0' }, '')
  t.equal(unregister.statusCode, 200)
  t.equal(unregister.headers['content-type'], 'application/json')
  t.equal(unregister.body, '')
  t.same(app.systemSharedMemory.status(), [])
})

t.test('the prefix option', async (t) => {
  const app = await buildApp(t, { prefix: '/triton' })
  const key = makeObject(t, 4096)

  t.test('serves everything under the prefix', async (t) => {
    assertEmptySuccess(t, await register(app, 'p', key, 16, 0, `/triton${SYSTEM}`))
    const status = await app.inject({ method: 'GET', url: `/triton${SYSTEM}/status` })
    t.equal(status.body, `[${statusJson('p', key, 0, 16)}]`)
    const regionStatus = await app.inject({ method: 'GET', url: `/triton${SYSTEM}/region/p/status` })
    t.equal(regionStatus.statusCode, 200)
    const wrongMethod = await app.inject({ method: 'GET', url: `/triton${SYSTEM}/unregister` })
    assertError(t, wrongMethod, 405, 'Method Not Allowed')
    const cuda = await app.inject({ method: 'GET', url: `/triton${CUDA}/status` })
    t.equal(cuda.body, '[]')
    assertEmptySuccess(t, await app.inject({ method: 'POST', url: `/triton${SYSTEM}/region/p/unregister` }))
    t.same(app.systemSharedMemory.status(), [])
  })

  t.test('serves nothing at the root', async (t) => {
    await register(app, 'kept', key, 16, 0, `/triton${SYSTEM}`)
    for (const [method, url] of [['GET', `${SYSTEM}/status`], ['POST', `${SYSTEM}/unregister`],
      ['POST', `${SYSTEM}/region/root/register`], ['GET', `${CUDA}/status`]] as const) {
      const response = await app.inject({ method, url, payload: method === 'POST' ? registerBody(key, 16) : undefined })
      t.equal(response.statusCode, 404, `${method} ${url}`)
    }
    t.same(names(app), ['kept'], 'no request at the root changed anything')
  })
})

t.test('the host\'s own routes and settings are unaffected', async (t) => {
  const app = Fastify({ ajv: { customOptions: { coerceTypes: true } } })
  t.teardown(() => app.close())
  app.setErrorHandler(async (error: Error, _request, reply) => reply.code(418).send({ host: error.message }))
  app.get('/host/count', {
    schema: { querystring: { type: 'object', properties: { n: { type: 'integer' } } } }
  }, async (request) => ({ type: typeof (request.query as { n: unknown }).n }))
  app.post('/host/echo', {
    schema: { body: { type: 'object', required: ['n'], properties: { n: { type: 'integer' } } } }
  }, async (request) => request.body)
  await app.register(fastifyTritonShm)
  await app.ready()
  const key = makeObject(t, 4096)

  t.test('the plugin never coerces strings, whatever the host\'s Ajv options', async (t) => {
    const byteSize = await app.inject({
      method: 'POST', url: `${SYSTEM}/region/r/register`, payload: JSON.stringify({ key, byte_size: '64' })
    })
    assertError(t, byteSize, 400, "Shared memory register request field 'byte_size' must be an unsigned integer")
    const offset = await app.inject({
      method: 'POST', url: `${SYSTEM}/region/r/register`, payload: JSON.stringify({ key, offset: '0', byte_size: 64 })
    })
    assertError(t, offset, 400, "Shared memory register request field 'offset' must be an unsigned integer")
    t.same(app.systemSharedMemory.status(), [])
  })

  t.test('the host still coerces, parses its JSON and answers its errors its own way', async (t) => {
    const coerced = await app.inject({ method: 'GET', url: '/host/count?n=5' })
    t.same(coerced.json(), { type: 'number' })
    const echoed = await app.inject({ method: 'POST', url: '/host/echo', payload: { n: '7' } })
    t.same(echoed.json(), { n: 7 })
    // The plugin reads every body as JSON; the host still refuses a content type it has no parser for.
    const xmlBody = await app.inject({
      method: 'POST', url: '/host/echo', headers: { 'content-type': 'application/xml' }, payload: '{"n":1}'
    })
    t.equal(xmlBody.statusCode, 418)
    t.match(xmlBody.json(), { host: /Unsupported Media Type/ })
    const invalid = await app.inject({ method: 'POST', url: '/host/echo', payload: { m: 1 } })
    t.equal(invalid.statusCode, 418, 'the host\'s error handler still answers the host\'s routes')
    t.match(invalid.json(), { host: /must have required property 'n'/ })
  })

  t.test('the plugin\'s routes keep their own error shape under the host\'s error handler', async (t) => {
    assertError(t, await app.inject({ method: 'GET', url: `${SYSTEM}/region/x/status` }), 404,
      "Unable to find system shared memory region: 'x'")
  })
})
