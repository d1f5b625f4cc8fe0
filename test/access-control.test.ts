/**
 * SPEC section 5: disabling client registration, restricting the whole API to a header, and
 * error messages that name nothing of the server's file system.
 */
import type { FastifyInstance, HTTPMethods } from 'fastify'
import t from 'tap'
import { buildApp, CUDA, registerBody, SYSTEM } from './helpers/app'
import { assertEmptySuccess, assertError, register } from './helpers/http'
import { makeObject, mappingsOf, PAGE_SIZE, uniqueKey } from './helpers/shm'
import { makeDirectory, makeFifo } from './helpers/special-objects'

const DISABLED = /^Client shared memory is disabled\. /

t.test('allowClientShm: false', async (t) => {
  const app = await buildApp(t, { allowClientShm: false })
  const key = makeObject(t, PAGE_SIZE)
  // The host itself may still register, through the decorator.
  app.systemSharedMemory.register('by-host', { key, byteSize: 64 })

  t.test('register answers 501, on system and CUDA routes, before the body is looked at', async (t) => {
    for (const base of [SYSTEM, CUDA]) {
      for (const payload of [registerBody(key, 16), undefined, '{not json', registerBody('', 0)]) {
        const response = await app.inject({ method: 'POST', url: `${base}/region/client/register`, payload })
        const message = assertError(t, response, 501, DISABLED)
        t.match(message, /'allowClientShm: true'/, 'names the option that enables it')
      }
      assertError(t, await app.inject({ method: 'POST', url: `${base}/register` }), 501, DISABLED)
    }
    t.same(app.systemSharedMemory.status(), [{ name: 'by-host', key, offset: 0, byte_size: 64 }])
  })

  t.test('status stays readable', async (t) => {
    const status = await app.inject({ method: 'GET', url: `${SYSTEM}/status` })
    t.equal(status.statusCode, 200)
    t.same(status.json(), [{ name: 'by-host', key, offset: 0, byte_size: 64 }])
    const regionStatus = await app.inject({ method: 'GET', url: `${SYSTEM}/region/by-host/status` })
    t.equal(regionStatus.statusCode, 200)
    const cuda = await app.inject({ method: 'GET', url: `${CUDA}/status` })
    t.equal(cuda.body, '[]')
  })

  t.test('a wrong method on register is still 405', async (t) => {
    const response = await app.inject({ method: 'GET', url: `${SYSTEM}/region/client/register` })
    assertError(t, response, 405, 'Method Not Allowed')
  })

  t.test('both system unregister routes answer 501 too, before the body is read, and change nothing', async (t) => {
    const statusBefore = (await app.inject({ method: 'GET', url: `${SYSTEM}/status` })).body
    const mappingsBefore = mappingsOf(key)
    t.equal(mappingsBefore.length, 1, 'the host\'s region is mapped')
    const lease = app.systemSharedMemory.acquire('by-host', 0, 64)
    lease.buffer.fill(0x5a)
    t.teardown(() => lease.release())
    const oversized = 'x'.repeat(128 * 1024) // beyond the body limit: 413 if it were read
    for (const url of [`${SYSTEM}/region/by-host/unregister`, `${SYSTEM}/region/unknown/unregister`, `${SYSTEM}/unregister`]) {
      for (const payload of [undefined, '', '{not json', oversized]) {
        const message = assertError(t, await app.inject({ method: 'POST', url, payload }), 501, DISABLED)
        t.equal(message, "Client shared memory is disabled. Register the plugin with 'allowClientShm: true' to enable.",
          `${url}: register's message, word for word`)
      }
    }
    t.equal((await app.inject({ method: 'GET', url: `${SYSTEM}/status` })).body, statusBefore, 'status is the same after')
    t.same(mappingsOf(key), mappingsBefore, 'nothing was unmapped')
    t.equal(lease.buffer.length, 64, 'a lease still reads its region')
    t.ok(lease.buffer.every((byte) => byte === 0x5a))
  })

  t.test('a wrong method on unregister is still 405', async (t) => {
    for (const url of [`${SYSTEM}/region/by-host/unregister`, `${SYSTEM}/unregister`]) {
      assertError(t, await app.inject({ method: 'GET', url }), 405, 'Method Not Allowed')
    }
  })

  t.test('CUDA unregister answers 200 as a server without GPUs does', async (t) => {
    assertEmptySuccess(t, await app.inject({ method: 'POST', url: `${CUDA}/region/x/unregister` }))
    assertEmptySuccess(t, await app.inject({ method: 'POST', url: `${CUDA}/unregister` }))
  })

  t.test('the host still unregisters through the registry', async (t) => {
    app.systemSharedMemory.unregister('by-host')
    t.same(app.systemSharedMemory.status(), [], 'once its last lease ends')
    t.same(mappingsOf(key), [], 'unmapped')
    app.systemSharedMemory.register('again', { key, byteSize: 64 })
    app.systemSharedMemory.unregisterAll()
    t.same(app.systemSharedMemory.status(), [])
    const status = await app.inject({ method: 'GET', url: `${SYSTEM}/status` })
    t.equal(status.statusCode, 200)
    t.equal(status.body, '[]', 'status answers an empty list')
  })
})

t.test('allowClientShm: true (the default) registers', async (t) => {
  for (const options of [{}, { allowClientShm: true }]) {
    const app = await buildApp(t, options)
    const key = makeObject(t, PAGE_SIZE)
    assertEmptySuccess(t, await register(app, 'r', key, 16))
  }
})

t.test('restrictedApi', async (t) => {
  const restrictedApi = { header: 'X-Triton-Shm-Key', value: 'let-me-in' }
  const forbidden = "This API is restricted, expecting header 'X-Triton-Shm-Key'"
  const app = await buildApp(t, { restrictedApi })
  const key = makeObject(t, PAGE_SIZE)
  app.systemSharedMemory.register('kept', { key, byteSize: 64 })

  /** Every route of both families, with the wrong methods, empty segments and bad bodies. */
  const everyRequest: Array<[HTTPMethods, string, string | undefined]> = []
  for (const base of [SYSTEM, CUDA]) {
    everyRequest.push(
      ['GET', `${base}/status`, undefined],
      ['HEAD', `${base}/status`, undefined],
      ['POST', `${base}/status`, undefined],
      ['GET', `${base}/region/kept/status`, undefined],
      ['DELETE', `${base}/region/kept/status`, undefined],
      ['POST', `${base}/region/new/register`, registerBody(key, 16)],
      ['POST', `${base}/region/new/register`, '{not json'],
      ['POST', `${base}/region/new/register`, JSON.stringify({ key, byte_size: '16' })],
      ['POST', `${base}/region/new/register`, 'x'.repeat(128 * 1024)],
      ['GET', `${base}/region/new/register`, undefined],
      ['POST', `${base}/region//register`, undefined],
      ['POST', `${base}/region/kept/unregister`, undefined],
      ['PUT', `${base}/region/kept/unregister`, undefined],
      ['POST', `${base}/unregister`, undefined],
      ['PATCH', `${base}/unregister`, undefined],
      ['POST', `${base}/register`, undefined]
    )
  }

  const send = (method: HTTPMethods, url: string, payload: string | undefined, headers: Record<string, string>) =>
    app.inject({ method, url, payload, headers })

  t.test('a missing or wrong header is 403 on every route, before anything else', async (t) => {
    const wrongHeaders: Array<Record<string, string>> = [
      {},
      { 'x-triton-shm-key': '' },
      { 'x-triton-shm-key': 'let-me-i' }, // shorter
      { 'x-triton-shm-key': 'let-me-in!' }, // longer
      { 'x-triton-shm-key': 'let-me-IN' }, // same length, other bytes
      { 'x-other-header': 'let-me-in' }
    ]
    for (const headers of wrongHeaders) {
      for (const [method, url, payload] of everyRequest) {
        const response = await send(method, url, payload, headers)
        const label = `${method} ${url} with ${JSON.stringify(headers)}`
        t.equal(response.statusCode, 403, label)
        t.equal(response.headers['content-type'], 'application/json', `${label}: content type`)
        if (method !== 'HEAD') t.equal(response.body, JSON.stringify({ error: forbidden }), `${label}: body`)
      }
    }
    t.same(app.systemSharedMemory.status(), [{ name: 'kept', key, offset: 0, byte_size: 64 }], 'nothing changed')
  })

  t.test('the right header opens every route, whatever the case of its name', async (t) => {
    for (const name of ['X-Triton-Shm-Key', 'x-triton-shm-key', 'X-TRITON-SHM-KEY']) {
      const headers = { [name]: 'let-me-in' }
      const status = await send('GET', `${SYSTEM}/status`, undefined, headers)
      t.equal(status.statusCode, 200, name)
      t.same(status.json(), [{ name: 'kept', key, offset: 0, byte_size: 64 }])
    }
    const headers = { 'x-triton-shm-key': 'let-me-in' }
    const expected: Array<[HTTPMethods, string, string | undefined, number]> = [
      ['GET', `${SYSTEM}/region/kept/status`, undefined, 200],
      ['POST', `${SYSTEM}/region/new/register`, registerBody(key, 16), 200],
      ['POST', `${SYSTEM}/region/new/register`, '{not json', 400],
      ['GET', `${SYSTEM}/region/new/register`, undefined, 405],
      ['POST', `${SYSTEM}/region//register`, undefined, 404],
      ['POST', `${SYSTEM}/register`, undefined, 400],
      ['POST', `${CUDA}/region/new/register`, undefined, 400],
      ['GET', `${CUDA}/status`, undefined, 200],
      ['POST', `${CUDA}/unregister`, undefined, 200],
      ['POST', `${SYSTEM}/region/new/unregister`, undefined, 200],
      ['POST', `${SYSTEM}/unregister`, undefined, 200]
    ]
    for (const [method, url, payload, statusCode] of expected) {
      t.equal((await send(method, url, payload, headers)).statusCode, statusCode, `${method} ${url}`)
    }
    t.same(app.systemSharedMemory.status(), [])
  })

  t.test('with an empty expected value the header must still be there', async (t) => {
    const emptyValue = await buildApp(t, { restrictedApi: { header: 'X-Empty', value: '' } })
    const url = `${SYSTEM}/status`
    assertError(t, await emptyValue.inject({ method: 'GET', url }), 403, "This API is restricted, expecting header 'X-Empty'")
    assertError(t, await emptyValue.inject({ method: 'GET', url, headers: { 'x-empty': 'x' } }), 403)
    t.equal((await emptyValue.inject({ method: 'GET', url, headers: { 'x-empty': '' } })).statusCode, 200)
  })

  t.test('the header check runs before the allowClientShm gate', async (t) => {
    const closed = await buildApp(t, { restrictedApi, allowClientShm: false })
    for (const url of [`${SYSTEM}/region/r/register`, `${SYSTEM}/region/r/unregister`, `${SYSTEM}/unregister`]) {
      assertError(t, await closed.inject({ method: 'POST', url, payload: registerBody(key, 16) }), 403, forbidden)
      assertError(t, await closed.inject({
        method: 'POST', url, payload: registerBody(key, 16), headers: { 'x-triton-shm-key': 'let-me-in' }
      }), 501, DISABLED)
    }
  })
})

t.test('error messages echo what the client sent, never file-system paths or system errors', async (t) => {
  const app = await buildApp(t)
  const key = makeObject(t, PAGE_SIZE)
  app.systemSharedMemory.register('private-region', { key, byteSize: 64 })
  const directory = makeDirectory(t)
  const fifo = makeFifo(t)
  const missing = uniqueKey('missing')

  const messages: string[] = []
  const collect = async (app: FastifyInstance, method: HTTPMethods, url: string, payload?: string) => {
    const response = await app.inject({ method, url, payload })
    messages.push(assertError(t, response, response.statusCode))
  }
  for (const [registerKey, byteSize, offset] of [[missing, 16, 0], [directory, 16, 0], [fifo, 16, 0],
    [key, PAGE_SIZE + 1, 0], [key, 0, 0], [key, 16, PAGE_SIZE], ['/a/b', 16, 0], ['..', 16, 0]] as const) {
    await collect(app, 'POST', `${SYSTEM}/region/r/register`, registerBody(registerKey, byteSize, offset))
  }
  await collect(app, 'POST', `${SYSTEM}/region/private-region/register`, registerBody(key, 16))
  await collect(app, 'GET', `${SYSTEM}/region/unknown/status`)
  await collect(app, 'POST', `${SYSTEM}/register`)
  await collect(app, 'POST', `${CUDA}/region/r/register`)

  t.equal(messages.length, 12)
  for (const message of messages) {
    t.notMatch(message, /\/dev\/shm|\bE[A-Z]{3,}\b|errno|shm_open|fstat|mmap|syscall/, message)
  }
  t.same(messages.slice(0, 3), [missing, directory, fifo].map((sent) => `Unable to open shared memory region: '${sent}'`),
    'an object that cannot be opened is named only by the key the client sent')
  // Only the duplicate registration of 'private-region' (the 9th request) may name that region.
  t.equal(messages[8], "shared memory region 'private-region' already in manager")
  for (const message of [...messages.slice(0, 8), ...messages.slice(9)]) {
    t.notMatch(message, /private-region/, `no other region is named: ${message}`)
  }
})
