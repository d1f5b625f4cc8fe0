/**
 * Regions past 4 GiB, as Triton serves them: registered whole, leased anywhere, even where one
 * region is larger than the largest ArrayBuffer this Node allows (2^32 bytes on Node 20). The
 * objects are sparse: they cost no memory until a page is touched.
 */
import { test } from 'tap'
import { MappedRange } from '../lib/addon/posix-shm'
import { buildApp, SYSTEM } from './helpers/app'
import { assertEmptySuccess, assertError, register } from './helpers/http'
import { buildInferApp, echoModel, infer, parseInferResponse, registerRegion, shmInput, shmOutput } from './helpers/kserve'
import { makeObject, mappingsOf, readObjectFile, writeObjectFile } from './helpers/shm'

const GiB = 1024 ** 3
const PAST_4_GIB = 4 * GiB + 1
/** Larger than one ArrayBuffer can be on this Node, when its limit is below the region limit. */
const beyondOneBuffer = MappedRange.maxWindowBytes + 1

test('a region of 4 GiB + 1 byte registers over HTTP and the process lives', async (t) => {
  const app = await buildApp(t)
  const key = makeObject(t, PAST_4_GIB, 'past4g')
  assertEmptySuccess(t, await register(app, 'big', key, PAST_4_GIB))
  const status = await app.inject({ url: `${SYSTEM}/region/big/status` })
  t.same(JSON.parse(status.body), [{ name: 'big', key, offset: 0, byte_size: PAST_4_GIB }])
  t.equal(mappingsOf(key).length, 1, 'mapped once')
  assertEmptySuccess(t, await app.inject({ method: 'POST', url: `${SYSTEM}/region/big/unregister` }))
  t.same(mappingsOf(key), [], 'unmapped on unregister')
})

test('leases anywhere in a region past 4 GiB read and write the object', async (t) => {
  const app = await buildApp(t)
  const registry = app.systemSharedMemory
  const offset = 12345 // not a page multiple: the mapping starts at the page below
  const byteSize = PAST_4_GIB + 4096
  const key = makeObject(t, offset + byteSize, 'anywhere')
  registry.register('big', { key, offset, byteSize })
  for (const at of [0, 2 ** 32 - 2, 2 ** 32 + 7, byteSize - 3]) {
    writeObjectFile(key, offset + at, [at % 251, 1, 2])
    const lease = registry.acquire('big', at, 3)
    t.same([...lease.buffer], [at % 251, 1, 2], `reads the object's bytes at ${at}`)
    lease.buffer[1] = 99
    t.same(readObjectFile(key, offset + at, 3), [at % 251, 99, 2], `writes reach the object at ${at}`)
    lease.release()
  }
  t.equal(mappingsOf(key).length, 1, 'every lease is a window over the one mapping')
})

test('unmapping a region past 4 GiB empties every view of every lease, kept or released', async (t) => {
  const app = await buildApp(t)
  const registry = app.systemSharedMemory
  const key = makeObject(t, PAST_4_GIB, 'detach')
  registry.register('big', { key, byteSize: PAST_4_GIB })
  const kept = registry.acquire('big', 2 ** 32, 1)
  const released = registry.acquire('big', 2 ** 32, 1)
  const twin = registry.acquire('big', 2 ** 32, 1)
  twin.buffer[0] = 5
  t.equal(kept.buffer[0], 5, 'two leases of one range see the same bytes')
  released.release()
  const escaped = released.buffer
  registry.unregister('big')
  t.ok(registry.has('big'), 'deferred while leases are live')
  kept.release()
  twin.release()
  t.notOk(registry.has('big'), 'gone with its last lease')
  t.same([kept.buffer.length, twin.buffer.length, escaped.length], [0, 0, 0], 'every view reads as empty')
  t.same(mappingsOf(key), [], 'unmapped')
})

test('a lease larger than one ArrayBuffer answers 400; smaller ones around it are served', async (t) => {
  if (beyondOneBuffer > 16 * GiB) {
    t.comment(`this Node's ArrayBuffers hold ${MappedRange.maxWindowBytes} bytes, more than the region limit: no lease can be too large`)
    t.pass('nothing to refuse on this Node')
    return
  }
  const app = await buildApp(t)
  const registry = app.systemSharedMemory
  const key = makeObject(t, beyondOneBuffer + 8, 'toolarge')
  registry.register('big', { key, byteSize: beyondOneBuffer + 8 })
  const refused = t.throws(() => registry.acquire('big', 8, beyondOneBuffer), {
    kind: 'invalid',
    code: 'ERR_SHM_LEASE_TOO_LARGE',
    message: `shared memory byte size ${beyondOneBuffer} for region 'big' exceeds the largest single view ` +
      `this server can hand out (${MappedRange.maxWindowBytes} bytes): split the tensor`
  })
  t.ok(refused)
  t.same(registry.counters().liveLeases, 0, 'the refusal holds nothing')
  const largest = registry.acquire('big', 8, MappedRange.maxWindowBytes)
  t.equal(largest.byteSize, MappedRange.maxWindowBytes, 'a lease of exactly the largest size is served')
  largest.release()
})

test('inference reads inputs and writes outputs beyond 4 GiB over HTTP', async (t) => {
  const { app } = await buildInferApp(t, [echoModel('echo', ['INT32', 'FP64'])])
  const key = makeObject(t, PAST_4_GIB + 64, 'infer')
  await registerRegion(t, app, 'big', key, PAST_4_GIB + 64)
  const inputAt = 2 ** 32 + 3 // unaligned: the tensors are copied out, still correct
  const int32 = Buffer.alloc(8)
  int32.writeInt32LE(-7, 0)
  int32.writeInt32LE(2 ** 31 - 1, 4)
  writeObjectFile(key, inputAt, int32)
  const fp64 = Buffer.alloc(16)
  fp64.writeDoubleLE(1.5, 0)
  fp64.writeDoubleLE(-0.25, 8)
  writeObjectFile(key, inputAt + 8, fp64)
  const response = await infer(app, 'echo', {
    inputs: [shmInput('IN_INT32', 'INT32', [2], 'big', 8, inputAt), shmInput('IN_FP64', 'FP64', [2], 'big', 16, inputAt + 8)],
    outputs: [shmOutput('OUT_INT32', 'big', 8, PAST_4_GIB + 64 - 24), shmOutput('OUT_FP64', 'big', 16, PAST_4_GIB + 64 - 16)]
  })
  t.equal(response.statusCode, 200, response.body)
  t.same(parseInferResponse(response).header.outputs.map(({ name }) => name), ['OUT_INT32', 'OUT_FP64'])
  t.same(readObjectFile(key, PAST_4_GIB + 64 - 24, 24), [...int32, ...fp64], 'outputs written at the end of the region')
})

test('a register past the region limit is refused before anything is mapped', async (t) => {
  const app = await buildApp(t, { limits: { maxRegionBytes: 4 * GiB } })
  const key = makeObject(t, PAST_4_GIB, 'limit')
  assertError(t, await register(app, 'big', key, PAST_4_GIB), 400,
    `cannot register shared memory region 'big': byte_size ${PAST_4_GIB} exceeds the server's limit of ${4 * GiB} bytes per region`)
  t.same(mappingsOf(key), [], 'nothing mapped')
})
