/**
 * Clients that make the server hold memory: one that stops reading its response, and one that asks
 * for a huge binary output of a tiny request. Over real sockets, against the example service where
 * the finding was made and against test models where a limit's edges are the point.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import t, { type Test } from 'tap'
import { buildServer } from '../example/server'
import { DEFAULT_INFER_LIMITS } from '../lib/index'
import { assertError } from './helpers/http'
import { binaryBody, buildInferApp, echoModel, infer, makeMappedObject, registerRegion, shmInput, shmOutput } from './helpers/kserve'
import { makeObject } from './helpers/shm'
import { drain, listenLocally, stalledInfer, untilNoConnections } from './helpers/slow-client'

const MiB = 1024 ** 2

const identityRequest = (byteSize: number) => ({
  inputs: [shmInput('INPUT0', 'FP32', [1, byteSize / 4], 'in', byteSize)],
  outputs: [{ name: 'OUTPUT0', parameters: { binary_data: true } }]
})

/** An echo model served on a real socket, and the body of a request whose 32 MiB binary answer
 * comes from a region: what a slow reader holds up. */
async function echoing32MiB (t: Test, sendTimeoutMs: number) {
  const { app } = await buildInferApp(t, [echoModel('m', ['UINT8'])], { limits: { sendTimeoutMs } })
  const port = await listenLocally(t, app)
  const object = await makeMappedObject(t, 32 * MiB)
  await registerRegion(t, app, 'in', object.key, 32 * MiB)
  const body = {
    inputs: [shmInput('IN_UINT8', 'UINT8', [32 * MiB], 'in', 32 * MiB)],
    outputs: [{ name: 'OUT_UINT8', parameters: { binary_data: true } }]
  }
  return { app, port, body }
}

t.test('a client that stops reading its response holds no region: unregister frees it at once', async (t) => {
  const app = await buildServer()
  const port = await listenLocally(t, app)
  const byteSize = 32 * MiB // well past what the two sockets' buffers hold
  const key = makeObject(t, byteSize, 'slow_reader')
  const base = `http://127.0.0.1:${port}/v2/systemsharedmemory`
  const registered = await fetch(`${base}/region/in/register`, { method: 'POST', body: JSON.stringify({ key, offset: 0, byte_size: byteSize }) })
  t.equal(registered.status, 200)
  const { socket } = await stalledInfer(t, port, 'identity_fp32', identityRequest(byteSize))
  t.equal((await fetch(`${base}/region/in/unregister`, { method: 'POST' })).status, 200)
  t.same(await (await fetch(`${base}/status`)).json(), [], 'the region is gone while its response is still unread')
  t.same(app.systemSharedMemory.status(), [])
  const again = await fetch(`${base}/region/in/register`, { method: 'POST', body: JSON.stringify({ key, offset: 0, byte_size: byteSize }) })
  t.equal(again.status, 200, 'its name is free again')
  socket.destroy()
})

t.test('a client that reads nothing for the send timeout is dropped; one that reads slowly is not', async (t) => {
  // Far above the slow reader's gaps between reads, so a loaded machine cannot make them look stalled.
  const sendTimeoutMs = 2000
  const { app, port, body } = await echoing32MiB(t, sendTimeoutMs)

  const stalled = await stalledInfer(t, port, 'm', body)
  await untilNoConnections(app)
  t.ok(stalled.received + await drain(stalled.socket) < 32 * MiB, 'the stalled client got part of its response, then the connection ended')

  const { socket: slow, received: first } = await stalledInfer(t, port, 'm', body)
  const progress = { received: first }
  slow.on('data', (chunk: Buffer) => { progress.received += chunk.length })
  const deadline = Date.now() + 120_000
  while (progress.received < 32 * MiB && Date.now() < deadline) {
    // Less than the timeout between reads: each read lets the server write again.
    await sleep(100)
    slow.resume()
    await sleep(5)
    slow.pause()
  }
  t.ok(progress.received > 32 * MiB, 'the slow reader got its whole response (the body and the headers)')
  slow.destroy()
})

t.test('the send timeout fires on time: a client that stopped reading is dropped one timeout later, not two', async (t) => {
  // Node's own socket timeout skipped its first expiry whenever the write queue had moved since it
  // was armed (the kernel took the socket buffers' worth before the client stalled): 6 s, not 3.
  const sendTimeoutMs = 3000
  const { app, port, body } = await echoing32MiB(t, sendTimeoutMs)
  for (let round = 0; round < 2; round++) {
    const { socket } = await stalledInfer(t, port, 'm', body)
    const stoppedAt = Date.now()
    await untilNoConnections(app)
    const after = Date.now() - stoppedAt
    socket.destroy()
    t.ok(after >= sendTimeoutMs - 200 && after < 1.5 * sendTimeoutMs, `dropped ${after} ms after the client stopped reading`)
  }
})

t.test('a tiny request cannot make a huge binary output: refused before the output is allocated', async (t) => {
  const app = await buildServer()
  const port = await listenLocally(t, app)
  const byteSize = 128 * MiB // sparse: nothing of it is resident
  const key = makeObject(t, byteSize, 'huge_output')
  const base = `http://127.0.0.1:${port}`
  await fetch(`${base}/v2/systemsharedmemory/region/in/register`, { method: 'POST', body: JSON.stringify({ key, offset: 0, byte_size: byteSize }) })
  const arrayBuffers = process.memoryUsage().arrayBuffers
  const response = await fetch(`${base}/v2/models/identity_fp32/infer`, { method: 'POST', body: JSON.stringify(identityRequest(byteSize)) })
  t.equal(response.status, 400)
  t.same(await response.json(), {
    error: `output 'OUTPUT0' is too large to send as binary data (a response holds at most ${DEFAULT_INFER_LIMITS.maxOutputBytes} ` +
      'bytes of tensor data outside shared memory): ask for it in shared memory'
  })
  t.ok(process.memoryUsage().arrayBuffers - arrayBuffers < 16 * MiB, 'no output storage was allocated')
  const output = makeObject(t, byteSize, 'huge_output_out')
  await fetch(`${base}/v2/systemsharedmemory/region/out/register`, { method: 'POST', body: JSON.stringify({ key: output, offset: 0, byte_size: byteSize }) })
  const inPlace = await fetch(`${base}/v2/models/identity_fp32/infer`, {
    method: 'POST',
    body: JSON.stringify({ inputs: identityRequest(byteSize).inputs, outputs: [shmOutput('OUTPUT0', 'out', byteSize)] })
  })
  t.equal(inPlace.status, 200, 'in shared memory, the same output is served')
})

t.test('the output bound: the limit, the request\'s own bytes, outputs not asked for, scratch for aliased outputs', async (t) => {
  const maxOutputBytes = 1024
  const { app } = await buildInferApp(t, [echoModel('m', ['UINT8', 'INT32'])], { limits: { maxOutputBytes } })
  const message = (output: string) => `output '${output}' is too large to send as binary data (a response holds at most ` +
    `${maxOutputBytes} bytes of tensor data outside shared memory): ask for it in shared memory`
  const object = await makeMappedObject(t, 8192)
  await registerRegion(t, app, 'r', object.key, 8192)
  const inputs = (bytes: number) => [shmInput('IN_UINT8', 'UINT8', [bytes], 'r', bytes), shmInput('IN_INT32', 'INT32', [1], 'r', 4, 4096)]
  const binaryOutputs = [{ name: 'OUT_UINT8', parameters: { binary_data: true } }, { name: 'OUT_INT32', parameters: { binary_data: true } }]

  t.equal((await infer(app, 'm', { inputs: inputs(1020), outputs: binaryOutputs })).statusCode, 200, '1020 + 4 bytes: at the limit')
  assertError(t, await infer(app, 'm', { inputs: inputs(1021), outputs: binaryOutputs }), 400, message('OUT_INT32'))
  const [uint8Output] = binaryOutputs
  // An output the request did not ask for is charged too.
  assertError(t, await infer(app, 'm', { inputs: inputs(1021), outputs: [uint8Output] }), 400, message('OUT_INT32'))
  t.equal((await infer(app, 'm', {
    inputs: inputs(2048), outputs: [shmOutput('OUT_UINT8', 'r', 2048, 4096 + 8), { name: 'OUT_INT32', parameters: { binary_data: true } }]
  })).statusCode, 200, 'an output in shared memory costs nothing')
  // Scratch for an output that overlaps its input is charged.
  assertError(t, await infer(app, 'm', { inputs: inputs(2048), outputs: [shmOutput('OUT_UINT8', 'r', 2048, 0), binaryOutputs[1]] }),
    400, message('OUT_UINT8'))

  const own = 4096
  const { payload, headers } = binaryBody({
    inputs: [{ name: 'IN_UINT8', datatype: 'UINT8', shape: [own - 4], parameters: { binary_data_size: own - 4 } },
      { name: 'IN_INT32', datatype: 'INT32', shape: [1], parameters: { binary_data_size: 4 } }],
    outputs: binaryOutputs
  }, [Buffer.alloc(own - 4, 7), Buffer.alloc(4)])
  const echoed = await app.inject({ method: 'POST', url: '/v2/models/m/infer', payload, headers })
  t.equal(echoed.statusCode, 200, 'a request has back as many bytes as it sent, above the limit')
})
