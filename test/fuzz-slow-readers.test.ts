/**
 * Property-based fuzzing of clients that misbehave while their response is sent: they stop reading
 * after some bytes, close mid-body, or read in dribbles, for outputs of every size in shared memory,
 * as binary data or as JSON, while regions are unregistered under them. Whatever they do: every
 * unregister completes once the response is built, the server drops whoever stalls past the send
 * timeout, answers others meanwhile, and ends with no extra descriptor or mapping.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import fc from 'fast-check'
import t from 'tap'
import { buildInferApp, echoModel, makeMappedObject, registerRegion, shmInput, shmOutput } from './helpers/kserve'
import { rawRequest } from './helpers/http'
import { openFdCount, shmMappings } from './helpers/shm'
import { listenLocally, stalledInfer, untilNoConnections } from './helpers/slow-client'
import { PATIENCE_MS } from './helpers/sync'

const RUNS = 40
const MiB = 1024 ** 2
const OBJECT_BYTES = 48 * MiB

/** What a client does once its response starts. */
const behaviour = fc.constantFrom('stop', 'close', 'dribble', 'read')
const output = fc.constantFrom('binary', 'json', 'shm')
/** Small enough for JSON, up to well past what the sockets' buffers hold. */
const byteSize = fc.oneof(fc.integer({ min: 1, max: 4096 }), fc.constantFrom(MiB, 8 * MiB, 24 * MiB))

t.test(`${RUNS} rounds of clients that stop, close or dribble: regions unregister, stalls are dropped, nothing leaks`, async (t) => {
  const { app, seen } = await buildInferApp(t, [echoModel('m', ['UINT8'])], { limits: { sendTimeoutMs: 1000 } })
  const port = await listenLocally(t, app)
  const object = makeMappedObject(t, OBJECT_BYTES, 'fuzz_slow')
  const registry = app.systemSharedMemory
  const fdsBefore = openFdCount()
  const mappingsBefore = shmMappings().length

  await fc.assert(fc.asyncProperty(fc.array(fc.tuple(behaviour, output, byteSize), { minLength: 1, maxLength: 4 }), async (clients) => {
    await registerRegion(t, app, 'in', object.key, OBJECT_BYTES / 2)
    await registerRegion(t, app, 'out', object.key, OBJECT_BYTES / 2, OBJECT_BYTES / 2)
    const responses = await Promise.all(clients.map(async ([does, to, anySize], index) => {
      const bytes = to === 'json' ? Math.min(anySize, 64 * 1024) : anySize // JSON of megabytes is only slow
      const outputs = to === 'shm'
        ? [shmOutput('OUT_UINT8', 'out', bytes, index)] // outputs may overlap each other: the last write wins
        : [{ name: 'OUT_UINT8', parameters: { binary_data: to === 'binary' } }]
      const started = await stalledInfer(t, port, 'm', { inputs: [shmInput('IN_UINT8', 'UINT8', [bytes], 'in', bytes)], outputs })
      return { does, started }
    }))
    registry.unregisterAll()
    if (registry.status().length !== 0) throw new Error('a region outlived its unregister: a built response still held it')
    const other = await rawRequest(port, 'POST', '/v2/models/none/infer', { connection: 'close' }, '{}')
    if (other.statusCode !== 404) throw new Error(`the server did not answer others meanwhile (${other.statusCode})`)
    await Promise.all(responses.map(async ({ does, started: { socket, closed } }) => {
      if (does === 'close') socket.destroy()
      if (does === 'read') socket.resume()
      if (does === 'dribble') {
        while (!socket.destroyed && socket.readable) {
          socket.resume()
          await sleep(2)
          socket.pause()
          await sleep(50)
        }
      }
      socket.resume()
      await closed
    }))
    await untilNoConnections(app)
    seen.length = 0
  }), { numRuns: RUNS })

  // A socket's descriptor is closed a turn of the event loop after its 'close' event.
  const deadline = Date.now() + PATIENCE_MS
  while (openFdCount() > fdsBefore && Date.now() < deadline) await sleep(20)
  t.equal(openFdCount(), fdsBefore, 'no file descriptor leaked')
  t.equal(shmMappings().length, mappingsBefore, 'no mapping leaked')
})
