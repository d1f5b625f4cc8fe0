/**
 * Resource exhaustion, fuzzed: infer requests at the extremes where real crashes live (huge shapes,
 * millions of elements, big BYTES tensors, deep JSON nesting, regions past 4 GiB, outputs too big
 * for JSON), against a real Fastify instance and real sparse shared memory. The property: the
 * process lives and keeps answering, nothing is 5xx, no lease is left behind, and memory grows by
 * at most a small multiple of the request's own bytes (SECURITY.md, "Per-request limits").
 */
import fc from 'fast-check'
import t from 'tap'
import type { BytesElements } from '../types'
import { buildInferApp, registerRegion, type TestModel } from './helpers/kserve'
import { makeObject } from './helpers/shm'

const RUNS = 120
const MiB = 1024 ** 2
const ZEROS_BYTES = 64 * MiB
const HUGE_BYTES = 4 * 1024 ** 3 + 8192
/** What the package may hold per byte of a request (JSON parsing is the worst case), plus room for
 * the heap's own growth and collection timing. */
const MEMORY_MULTIPLE = 16
const MEMORY_SLACK = 256 * MiB

/** Reads a little of every input (a model's own per-element work is its own cost) and answers a
 * small digest, so what is measured is the package. */
const digestModel: TestModel = {
  signature: {
    name: 'digest',
    inputs: [{ name: 'IN', datatype: 'INT32', shape: [-1] }, { name: 'TEXT', datatype: 'BYTES', shape: [-1] }],
    outputs: [{ name: 'DIGEST', datatype: 'FP64', shape: [2] }, { name: 'COPY', datatype: 'INT32', shape: [-1] }]
  },
  execute (infer) {
    const numbers = infer.input<Int32Array>('IN')
    const text = infer.input<BytesElements>('TEXT').data
    const copy = infer.output<Int32Array>('COPY', numbers.shape)
    if (copy.length > 0) copy[copy.length - 1] = numbers.data[numbers.data.length - 1]
    infer.output<Float64Array>('DIGEST', [2]).set([numbers.data.length, text.at(-1)?.length ?? -1])
  }
}

const dims = fc.oneof(
  fc.constantFrom(0, 1, 2, 16, 2 ** 20, 2 ** 24, 2 ** 31, 2 ** 32, 2 ** 53 - 1),
  fc.integer({ min: 0, max: 2 ** 26 })
)
const shape = fc.array(dims, { minLength: 0, maxLength: 4 })
const offsetsIn = (regionBytes: number) => fc.oneof(
  fc.constantFrom(0, 4, 2 ** 32 - 4, 2 ** 32, 2 ** 32 + 4, regionBytes - 4, regionBytes, 2 ** 53),
  fc.integer({ min: 0, max: regionBytes })
)
const sizesIn = (regionBytes: number) => fc.oneof(
  fc.constantFrom(0, 4, 4 * 2 ** 20, 4 * 2 ** 20 + 4, 2 ** 32, 2 ** 32 + 4, regionBytes, 2 ** 64),
  fc.integer({ min: 0, max: regionBytes })
)

/** One input of any source, at the extremes. */
function inputArbitrary (name: string, datatype: 'INT32' | 'BYTES') {
  const inRegion = (region: string, regionBytes: number) =>
    fc.record({ shape, offset: offsetsIn(regionBytes), byteSize: sizesIn(regionBytes) }).map(({ shape, offset, byteSize }) => ({
      wire: { name, datatype, shape, parameters: { shared_memory_region: region, shared_memory_offset: offset, shared_memory_byte_size: byteSize } },
      bytes: Math.min(byteSize, regionBytes)
    }))
  const deepJson = fc.constantFrom(1, 2, 63, 64, 65, 7000, 100000).map((depth) => ({
    wire: `{"name":"${name}","datatype":"${datatype}","shape":[1],"data":${'['.repeat(depth)}${datatype === 'BYTES' ? '"x"' : 1}${']'.repeat(depth)}}`,
    bytes: 0
  }))
  const json = fc.record({ shape, count: fc.constantFrom(0, 1, 1000, 100_000) }).map(({ shape, count }) => ({
    wire: { name, datatype, shape, data: new Array(count).fill(datatype === 'BYTES' ? '' : 0) },
    bytes: 0
  }))
  // Shapes that match their bytes (4 per element: an INT32, or an empty BYTES element), so that
  // large requests also get past the checks: up to 16 Mi elements, and past 4 GiB.
  const counts = fc.oneof(fc.constantFrom(1, 2 ** 20, 2 ** 20 + 1, 2 ** 22, 2 ** 24), fc.integer({ min: 0, max: 2 ** 24 }))
  const matching = fc.oneof(
    counts.map((count) => ({ region: 'zeros', offset: 0, count })),
    counts.map((count) => ({ region: 'huge', offset: HUGE_BYTES - 4 * count, count })),
    counts.map((count) => ({ region: 'huge', offset: 2 ** 32 - 2 * count, count }))
  ).map(({ region, offset, count }) => ({
    wire: { name, datatype, shape: [count], parameters: { shared_memory_region: region, shared_memory_offset: offset, shared_memory_byte_size: 4 * count } },
    bytes: 4 * count
  }))
  const matchingJson = fc.constantFrom(0, 1, 1000, 100_000).map((count) => ({
    wire: { name, datatype, shape: [count], data: new Array(count).fill(datatype === 'BYTES' ? 'é' : -2147483648) },
    bytes: 0
  }))
  return fc.oneof(inRegion('zeros', ZEROS_BYTES), inRegion('huge', HUGE_BYTES), deepJson, json, matching, matching, matchingJson)
}

const outputArbitrary = fc.oneof(
  fc.constant(undefined),
  fc.constant([{ name: 'COPY' }, { name: 'DIGEST' }]),
  fc.constant([{ name: 'COPY', parameters: { binary_data: true } }]),
  fc.record({ offset: offsetsIn(HUGE_BYTES), byteSize: sizesIn(HUGE_BYTES) }).map(({ offset, byteSize }) =>
    [{ name: 'COPY', parameters: { shared_memory_region: 'huge', shared_memory_offset: offset, shared_memory_byte_size: byteSize } }])
)

const bodyOf = (inputs: Array<{ wire: unknown }>, outputs: unknown) =>
  `{"inputs":[${inputs.map(({ wire }) => typeof wire === 'string' ? wire : JSON.stringify(wire)).join(',')}]` +
  (outputs === undefined ? '}' : `,"outputs":${JSON.stringify(outputs)}}`)

t.test(`${RUNS} infer requests at the extremes: the process lives, answers, and memory stays bounded`, async (t) => {
  const { app } = await buildInferApp(t, [digestModel])
  await registerRegion(t, app, 'zeros', makeObject(t, ZEROS_BYTES, 'fuzz_zeros'), ZEROS_BYTES)
  await registerRegion(t, app, 'huge', makeObject(t, HUGE_BYTES, 'fuzz_huge'), HUGE_BYTES)
  const statuses = new Map<number, number>()
  let largest = { growth: 0, requestBytes: 0 }

  await fc.assert(fc.asyncProperty(inputArbitrary('IN', 'INT32'), inputArbitrary('TEXT', 'BYTES'), outputArbitrary,
    async (numbers, text, outputs) => {
      const payload = bodyOf([numbers, text], outputs)
      const requestBytes = payload.length + numbers.bytes + text.bytes
      const rssBefore = process.memoryUsage().rss
      const response = await app.inject({ method: 'POST', url: '/v2/models/digest/infer', payload })
      const growth = process.memoryUsage().rss - rssBefore
      statuses.set(response.statusCode, (statuses.get(response.statusCode) ?? 0) + 1)
      if (response.statusCode >= 500) throw new Error(`${response.statusCode}: ${response.body.slice(0, 300)} for ${payload.slice(0, 300)}`)
      if (growth > MEMORY_MULTIPLE * requestBytes + MEMORY_SLACK) {
        throw new Error(`memory grew by ${growth} bytes for a request of ${requestBytes}: ${payload.slice(0, 300)}`)
      }
      if (growth > largest.growth) largest = { growth, requestBytes }
      if (app.systemSharedMemory.counters().liveLeases !== 0) throw new Error('a lease outlived its request')
      const live = await app.inject({ method: 'POST', url: '/v2/models/nope/infer', payload: '{}' })
      if (live.statusCode !== 404) throw new Error('the service stopped answering')
    }
  ), { numRuns: RUNS })

  t.comment(`answers by status: ${JSON.stringify(Object.fromEntries(statuses))}; largest growth: ${(largest.growth / MiB).toFixed(1)} MiB, for a request of ${largest.requestBytes} bytes`)
  t.ok((statuses.get(200) ?? 0) > 0, 'some requests were served, so the fuzz reaches the model')
  t.ok((statuses.get(400) ?? 0) > 0, 'some were refused')
})
