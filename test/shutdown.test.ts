/**
 * `app.close()` while an inference request is in flight: the request finishes with its regions
 * still mapped (they are unmapped when its leases end), over inject and over a real socket; with
 * `forceCloseConnections: true` the client is gone and the model is told so; and the registry
 * refuses registrations once closed, as nothing would unmap them.
 */
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import t, { type Test } from 'tap'
import type { FastifyInstance } from 'fastify'
import { buildInferApp, infer, inferUrl, makeMappedObject, registerRegion, shmInput, shmOutput, sumModel, type TestModel } from './helpers/kserve'
import { mappingsOf } from './helpers/shm'

/** A promise and the function that settles it. */
function deferred (): { promise: Promise<void>, resolve: () => void } {
  let settle = () => {}
  const promise = new Promise<void>((resolve) => { settle = resolve })
  return { promise, resolve: settle }
}

/** Triton's `simple`, waiting in the middle of its run until `proceed` resolves; it records
 * whether its request was abandoned meanwhile, then calls `looked`. */
function slowSum (entered: () => void, proceed: Promise<void>, aborted: boolean[], looked: () => void): TestModel {
  const sum = sumModel('slow')
  return {
    signature: sum.signature,
    async execute (request) {
      entered()
      await proceed
      aborted.push(request.signal.aborted)
      looked()
      request.signal.throwIfAborted()
      await sum.execute(request)
    }
  }
}

const INPUTS = [0, 64].map((offset, index) => shmInput(`INPUT${index}`, 'INT32', [1, 16], 'in', 64, offset))
const OUTPUTS = [0, 64].map((offset, index) => shmOutput(`OUTPUT${index}`, 'out', 64, offset))
const BODY = { inputs: INPUTS, outputs: OUTPUTS }

/** An app serving `slowSum`, with regions `in` (INPUT0 = 0..15, INPUT1 = 1s) and `out` registered. */
async function slowApp (t: Test, options: Parameters<typeof buildInferApp>[2] = {}) {
  const entered = deferred()
  const proceed = deferred()
  const looked = deferred()
  const aborted: boolean[] = []
  const { app } = await buildInferApp(t, [slowSum(entered.resolve, proceed.promise, aborted, looked.resolve)], options)
  const input = makeMappedObject(t, 128, 'in')
  const output = makeMappedObject(t, 128, 'out')
  new Int32Array(input.bytes.buffer, input.bytes.byteOffset, 32).set([...Array(16).keys(), ...Array(16).fill(1)])
  await registerRegion(t, app, 'in', input.key, 128)
  await registerRegion(t, app, 'out', output.key, 128)
  const outputs = () => new Int32Array(Uint8Array.from(output.read()).buffer)
  return { app, entered: entered.promise, proceed: proceed.resolve, aborted, looked: looked.promise, input, output, outputs }
}

const SUMS = Array.from({ length: 16 }, (_, index) => index + 1)
const DIFFERENCES = Array.from({ length: 16 }, (_, index) => index - 1)

function assertClosedRegistry (t: Test, app: FastifyInstance, key: string) {
  t.same(app.systemSharedMemory.status(), [], 'every region is gone')
  t.throws(() => app.systemSharedMemory.register('late', { key, byteSize: 8 }),
    { kind: 'unavailable', code: 'ERR_SHM_REGISTRY_CLOSED' }, 'register after close is refused')
  t.same(app.systemSharedMemory.status(), [], 'and changes nothing')
}

t.test('over inject: a request in flight at close finishes with its regions mapped', async (t) => {
  const { app, entered, proceed, aborted, input, output, outputs } = await slowApp(t)
  const answer = infer(app, 'slow', BODY)
  await entered
  const closing = app.close()
  t.equal(mappingsOf(input.key).length, 2, 'the leased regions are still mapped while the request runs (and the client\'s own)')

  proceed()
  const response = await answer
  t.equal(response.statusCode, 200, response.body)
  t.same(aborted, [false])
  const written = outputs()
  t.same([...written.subarray(0, 16)], SUMS, 'OUTPUT0 computed from the inputs as they were')
  t.same([...written.subarray(16, 32)], DIFFERENCES)
  await closing
  t.equal(mappingsOf(input.key).length, 1, 'the server\'s mapping went with the request (the client\'s stays)')
  assertClosedRegistry(t, app, input.key)
  t.equal(mappingsOf(output.key).length, 1)
})

/** POSTs `body` to the app's infer route over a real socket. */
function post (port: number, body: unknown): Promise<{ statusCode: number, text: string }> {
  return new Promise((resolve, reject) => {
    const request = http.request({ host: '127.0.0.1', port, method: 'POST', path: inferUrl('slow') }, (response) => {
      let text = ''
      response.setEncoding('utf8')
      response.on('data', (chunk: string) => { text += chunk })
      response.on('end', () => resolve({ statusCode: response.statusCode ?? 0, text }))
    })
    request.on('error', reject)
    request.end(JSON.stringify(body))
  })
}

t.test('over a real socket: close lets the request in flight finish, then unmaps', async (t) => {
  const { app, entered, proceed, aborted, input, outputs } = await slowApp(t)
  await app.listen({ host: '127.0.0.1', port: 0 })
  const answer = post((app.server.address() as AddressInfo).port, BODY)
  await entered
  const closing = app.close()
  proceed()
  const response = await answer
  t.equal(response.statusCode, 200, response.text)
  t.same(aborted, [false])
  t.same([...outputs().subarray(0, 16)], SUMS)
  await closing
  t.equal(mappingsOf(input.key).length, 1, 'only the client\'s own mapping is left')
  assertClosedRegistry(t, app, input.key)
})

t.test('forceCloseConnections: the client is cut off, the model is told, and nothing stays mapped', async (t) => {
  const { app, entered, proceed, aborted, looked, input } = await slowApp(t, { server: { forceCloseConnections: true } })
  await app.listen({ host: '127.0.0.1', port: 0 })
  const answer = post((app.server.address() as AddressInfo).port, BODY)
  await entered
  await app.close()
  await t.rejects(answer, { code: 'ECONNRESET' }, 'the connection was closed under the request, as the option asks')
  t.equal(mappingsOf(input.key).length, 1, 'its leases ended with the connection: the server unmapped the regions')
  proceed()
  await looked
  t.same(aborted, [true], 'the model sees its request abandoned (signal aborted) instead of reading unmapped memory')
  assertClosedRegistry(t, app, input.key)
})
