/**
 * The Node client's gRPC face against the plugin's gRPC listener: the KServeClient flow over gRPC,
 * on real shared memory, and its errors as gRPC statuses.
 */
import { status } from '@grpc/grpc-js'
import Fastify from 'fastify'
import t, { type Test } from 'tap'
import { GrpcKServeClient } from '../lib/grpc'
import fastifyTritonShm, { SharedMemoryObject } from '../lib/index'
import { modelTable } from './helpers/grpc'
import { sumModel } from './helpers/kserve'
import { uniqueKey, unlinkOnTeardown } from './helpers/shm'

async function listening (t: Test, options: object = {}) {
  const app = Fastify()
  await app.register(fastifyTritonShm, { grpc: { port: 0, models: modelTable([sumModel()]) }, ...options })
  t.teardown(() => app.close())
  await app.ready()
  return app
}

const shm = (region: string, offset: number) => ({ shared_memory_region: region, shared_memory_offset: offset, shared_memory_byte_size: 64 })

t.test('register, infer through shared memory, status and unregister over gRPC', async (t) => {
  const app = await listening(t)
  const client = new GrpcKServeClient(`127.0.0.1:${app.tritonGrpc.port}`)
  t.teardown(() => client.close())
  const key = uniqueKey('client')
  const region = SharedMemoryObject.create(key, 256)
  unlinkOnTeardown(t, key)
  t.teardown(() => region.close())
  new Int32Array(region.bytes.buffer, 0, 32).set([...Array(16).keys(), ...new Array(16).fill(2)])
  await client.unregisterCudaSharedMemory()
  await client.unregisterSystemSharedMemory()
  await client.registerSystemSharedMemory('zeta', key, 256)
  await client.registerSystemSharedMemory('alpha', key, 128, 128)
  t.same(await client.systemSharedMemoryStatus(), [
    { name: 'alpha', key, offset: 128, byte_size: 128 }, { name: 'zeta', key, offset: 0, byte_size: 256 }
  ], 'sorted by name, numbers as numbers')
  t.same(await client.systemSharedMemoryStatus('alpha'), [{ name: 'alpha', key, offset: 128, byte_size: 128 }])
  const response = await client.infer('simple', {
    id: 'x1',
    inputs: [0, 1].map((index) => ({ name: `INPUT${index}`, datatype: 'INT32', shape: [1, 16], parameters: shm('zeta', 64 * index) })),
    outputs: [{ name: 'OUTPUT0', parameters: { ...shm('alpha', 0), binary_data: false } }, { name: 'OUTPUT1', parameters: { ...shm('alpha', 64), weight: 0.5 } }]
  })
  t.same(response, {
    id: 'x1',
    model_name: 'simple',
    model_version: '1',
    outputs: [{ name: 'OUTPUT0', datatype: 'INT32', shape: [1, 16] }, { name: 'OUTPUT1', datatype: 'INT32', shape: [1, 16] }]
  })
  t.same(Array.from(new Int32Array(region.bytes.buffer, 128, 16)), [...Array(16).keys()].map((value) => value + 2), 'OUTPUT0 in shared memory')
  t.same(Array.from(new Int32Array(region.bytes.buffer, 192, 16)), [...Array(16).keys()].map((value) => value - 2), 'OUTPUT1 in shared memory')
  const noId = await client.infer('simple', { inputs: [0, 1].map((index) => ({ name: `INPUT${index}`, datatype: 'INT32', shape: [1, 16], parameters: shm('zeta', 64 * index) })) })
  t.notOk('id' in noId, 'no id sent, none answered')
  await client.unregisterSystemSharedMemory('zeta')
  await client.unregisterSystemSharedMemory()
  t.same(await client.systemSharedMemoryStatus(), [])
  await t.rejects(client.systemSharedMemoryStatus('zeta'), { code: status.NOT_FOUND, details: "Unable to find system shared memory region: 'zeta'" })
})

t.test('metadata sent with every call: the restricted API', async (t) => {
  const app = await listening(t, { restrictedApi: { header: 'x-key', value: 'k' } })
  const address = `127.0.0.1:${app.tritonGrpc.port}`
  const without = new GrpcKServeClient(address)
  const withKey = new GrpcKServeClient(address, { metadata: { 'x-key': 'k' } })
  t.teardown(() => { without.close(); withKey.close() })
  await t.rejects(without.systemSharedMemoryStatus(), { code: status.UNAVAILABLE })
  t.same(await withKey.systemSharedMemoryStatus(), [])
})
