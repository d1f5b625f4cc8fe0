/**
 * The statistics cells and their table, in one process: several registries of one store stand
 * for several processes (each takes a process slot of its own). Batch sizes beyond a process's
 * slots, counts made before a table shares them, the latest requests' ring, Triton's failure
 * reasons, the bounds of the file, and what a table may share.
 */
import { readFileSync, truncateSync, writeFileSync } from 'node:fs'
import t, { type Test } from 'tap'
import { InferRequest, type ModelDeclaration, ModelTable, Registry, TritonError } from '../lib/index'
import { MemoryModelStore } from '../lib/store/model-store'
import { BATCH_SLOTS, BYTE_SIZE, CELL, changeBlock, changeCounter, MODEL_SLOTS, readBlock, SAMPLE_SLOTS, StatisticsTable } from '../lib/store/statistics-table'
import type { InferRequestWire, ModelSignature } from '../types'
import { storePath } from './helpers/registry-peer'
import { bounded } from './helpers/sync'

const tensor = (name: string) => ({ name, datatype: 'INT32' as const, shape: [-1] })

function model (overrides: Partial<ModelDeclaration> = {}): ModelDeclaration {
  return {
    name: 'm',
    maxBatchSize: Infinity,
    inputs: [tensor('INPUT0')],
    outputs: [tensor('OUTPUT0')],
    run (infer) {
      if (infer.id === 'fail') throw new Error('the model failed')
      const { data, shape } = infer.input<Int32Array>('INPUT0')
      infer.output<Int32Array>('OUTPUT0', shape).set(data)
    },
    ...overrides
  }
}

/** A request of `batch` elements; of no input at all for 0. */
const wire = (batch: number, id = ''): InferRequestWire =>
  ({ id, inputs: batch === 0 ? [] : [{ name: 'INPUT0', datatype: 'INT32', shape: [batch], data: Array(batch).fill(1) }] })

function shared (t: Test, store: string): Registry {
  const registry = new Registry({ sharedRegistry: { path: store, checkIntervalMs: 1000 } })
  t.teardown(() => registry.close())
  return registry
}

function inferOf (registry: Registry, table: ModelTable) {
  const read = (body: InferRequestWire) => (signature: ModelSignature) => new InferRequest(body, Buffer.alloc(0), { registry, model: signature })
  return (batch: number, id?: string, call: { beforeRun?: () => void, respond?: () => unknown } = {}) =>
    table.infer('m', undefined, { read: read(wire(batch, id)), respond: () => 'ok', ...call }).catch((error: Error | null) => error?.message ?? String(error))
}

const successes = (table: ModelTable) => table.statistics('m').model_stats[0].inference_stats.success.count
const batchSizes = (table: ModelTable) => table.statistics('m').model_stats[0].batch_stats.map(({ batch_size: size, compute_infer: { count } }) => [size, count])

t.test('two processes of one store: each counts in its own cells, each answers the sum', async (t) => {
  const store = storePath(t)
  const [one, two] = [shared(t, store), shared(t, store)]
  const tables = [new ModelTable([model()]), new ModelTable([model()])]
  const [inferOne, inferTwo] = [inferOf(one, tables[0]), inferOf(two, tables[1])]
  await inferOne(1)
  t.equal(successes(tables[0]), 1, 'counted before the table shares its statistics')
  tables[0].serveWith(one)
  tables[0].serveWith(one)
  tables[1].serveWith(two)
  t.same(tables.map(successes), [1, 1], 'the counts made before are the shared ones\' start')
  await inferTwo(2)
  await inferOne(2)
  t.same(tables.map(successes), [3, 3])
  t.same(tables.map(batchSizes), [[[1, 1], [2, 2]], [[1, 1], [2, 2]]])
  t.same(tables[0].statistics(), tables[1].statistics())
  t.throws(() => tables[0].serveWith(two), { code: 'ERR_SHM_MODEL_TABLE_SHARED' }, 'a table serves one shared registry')
  tables[0].serveWith(new Registry())
  tables[0].serveWith({} as never)
  t.pass('a registry of this process, or a host\'s own, shares nothing')
})

t.test('a process keeps the first batch sizes it sees; later ones count everywhere but in batch_stats', async (t) => {
  const store = storePath(t)
  const registry = shared(t, store)
  const table = new ModelTable([model()])
  const infer = inferOf(registry, table)
  for (let batch = 1; batch <= BATCH_SLOTS + 2; batch++) await infer(batch)
  await infer(1)
  t.equal(successes(table), BATCH_SLOTS + 3)
  t.same(batchSizes(table).map(([size]) => size), Array.from({ length: BATCH_SLOTS }, (_, index) => index + 1))
  t.equal(table.statistics('m').model_stats[0].batch_stats[0].compute_infer.count, 2)

  // Those counts, made in this process's own cells, moved into a shared registry's.
  table.serveWith(registry)
  const other = new ModelTable([model()])
  other.serveWith(shared(t, store))
  t.same(batchSizes(other), batchSizes(table))
  t.equal(successes(other), BATCH_SLOTS + 3)
  // A third table's cells in this store already hold 32 sizes: moving more into them overflows.
  const third = new ModelTable([model()])
  const inferThird = inferOf(registry, third)
  await inferThird(BATCH_SLOTS + 5)
  await inferThird(1)
  // The same process (registry) as the first table: its cells there hold 32 sizes.
  third.serveWith(registry)
  t.equal(successes(other), BATCH_SLOTS + 5)
  t.same(batchSizes(other).length, BATCH_SLOTS, 'its batch size had no slot left there')
  t.same(batchSizes(other)[0], [1, 3], 'a size those cells hold already adds to its slot')
})

t.test('the latest requests of every process, for summaries', async (t) => {
  const store = storePath(t)
  const [one, two] = [shared(t, store), shared(t, store)]
  const tables = [new ModelTable([model()]), new ModelTable([model()])]
  tables.forEach((table, index) => table.serveWith([one, two][index]))
  const before = Date.now()
  for (let index = 0; index < SAMPLE_SLOTS + 3; index++) await inferOf(one, tables[0])(1)
  await inferOf(two, tables[1])(1)
  const [version] = tables[1].metricVersions()
  const samples = version.samples(before)
  t.equal(samples.request.length, SAMPLE_SLOTS + 1, 'the ring of each process holds its latest requests')
  t.ok(samples.request.every((us, index) => us >= samples.compute_infer[index]), 'a request lasts longer than its run')
  t.same(version.samples(Date.now() + 1000).request, [], 'none ended after now')
  t.match(version.totals(), { success: SAMPLE_SLOTS + 4, inferenceCount: SAMPLE_SLOTS + 4, executionCount: SAMPLE_SLOTS + 4, pending: 0 })
})

t.test('failures by Triton\'s reasons, and the pending gauge', async (t) => {
  const registry = new Registry()
  t.teardown(() => registry.close())
  const table = new ModelTable([model()])
  const infer = inferOf(registry, table)
  let seenPending = -1
  const pending = () => table.metricVersions()[0].totals().pending
  t.equal(await infer(1, '', { beforeRun: () => { seenPending = pending() } }), 'ok')
  t.equal(seenPending, 1, 'pending while it waits for its run')
  t.equal(await infer(1, 'fail'), 'the model failed', 'BACKEND: the model failed')
  t.equal(await infer(0), "expected 1 inputs but got 0 inputs for model 'm'. Got input(s) [], but missing required input(s) ['INPUT0']. Please provide all required input(s).", 'OTHER: the request could not be read')
  t.match(await infer(1, '', { beforeRun: () => { throw new TritonError('ERR_TEST', 'exhausted', 'busy') } }), 'busy', 'REJECTED: refused before its run')
  t.match(await infer(1, '', { beforeRun: () => { throw Object.assign(new Error('Too Many Requests'), { statusCode: 429 }) } }), 'Too Many Requests', 'REJECTED too')
  t.match(await infer(1, '', { beforeRun: () => { throw new TritonError('ERR_TEST', 'cancelled', 'gone') } }), 'gone', 'CANCELED')
  t.match(await infer(1, '', { respond: () => { throw new Error('cannot answer') } }), 'cannot answer', 'OTHER: the response failed')
  // eslint-disable-next-line no-throw-literal -- a host's code may throw anything
  t.match(await infer(1, '', { beforeRun: () => { throw null } }), /null/, 'OTHER: a throw of nothing')
  const totals = table.metricVersions()[0].totals()
  t.same(totals, {
    success: 1,
    failures: { REJECTED: 2, CANCELED: 1, BACKEND: 1, OTHER: 3 },
    inferenceCount: 1,
    executionCount: 1,
    pending: 0,
    microseconds: totals.microseconds,
    firstResponse: { ...totals.firstResponse, count: 1 }
  }, 'and nothing pending once they ended; only the request that answered has a first response')
})

t.test('a request whose client left counts as canceled', async (t) => {
  const registry = new Registry()
  t.teardown(() => registry.close())
  const table = new ModelTable([model()])
  const read = (signature: ModelSignature) => {
    const infer = new InferRequest(wire(1), Buffer.alloc(0), { registry, model: signature })
    infer.abandon()
    return infer
  }
  await t.rejects(table.infer('m', undefined, { read, respond: () => 'ok' }))
  t.match(table.metricVersions()[0].totals().failures, { CANCELED: 1 })
})

t.test('the file\'s bounds: its layout, and the model versions it has room for', async (t) => {
  const store = storePath(t)
  const registry = shared(t, store)
  const path = `${store}-statistics`
  const many = new ModelTable(Array.from({ length: MODEL_SLOTS }, (_, index) => model({ name: `m${index}` })))
  many.serveWith(registry)
  t.equal(readFileSync(path).length, BYTE_SIZE, 'one block per process slot and version slot (a sparse file)')
  const oneMore = new ModelTable([model({ name: 'extra' })])
  t.throws(() => oneMore.serveWith(shared(t, store)), {
    code: 'ERR_SHM_TOO_MANY_SHARED_MODEL_VERSIONS',
    message: "fastify-triton-shm: the statistics of a shared registry hold at most 256 model versions: model 'extra' version 1 is one more"
  })
  const same = new ModelTable([model({ name: 'm0' })])
  same.serveWith(shared(t, store))
  t.pass('a version already in the file takes its slot again')

  const other = `${storePath(t)}-statistics`
  writeFileSync(other, Buffer.alloc(8, 1))
  t.throws(() => new StatisticsTable(other), { message: /^the statistics file beside the store has another layout/ })
})

t.test('processStatistics keeps a table\'s statistics in its process', async (t) => {
  const store = storePath(t)
  const [one, two] = [shared(t, store), shared(t, store)]
  const local = new ModelTable([model()], { processStatistics: true })
  const sharing = new ModelTable([model()])
  local.serveWith(one)
  sharing.serveWith(two)
  await inferOf(one, local)(1)
  await inferOf(two, sharing)(1)
  t.same([successes(local), successes(sharing)], [1, 1])
})

t.test('statistics read after the store closed are empty, not wrong; the store\'s checks survive a failing listener', async (t) => {
  const store = storePath(t)
  const registry = new Registry({ sharedRegistry: { path: store, checkIntervalMs: 10 } })
  const table = new ModelTable([model()], { repository: true })
  table.serveWith(registry)
  await inferOf(registry, table)(1)
  let calls = 0
  registry.modelStore().onCheck(() => {
    calls++
    throw new Error('a failing listener')
  })
  let wait: NodeJS.Timeout | undefined
  await bounded(new Promise<void>((resolve) => {
    wait = setInterval(() => { if (calls >= 2) resolve() }, 5)
  }), 'two checks of the store').finally(() => clearInterval(wait))
  registry.close()
  t.equal(successes(table), 0)
  t.same(table.index(), [{ name: 'm', version: '1', state: 'READY' }], 'the repository answers from what it read last')
})

t.test('a table\'s own store: records, and the generation a load bumps', async (t) => {
  const store = new MemoryModelStore()
  t.equal(store.shared, false)
  t.equal(store.cells('m', '1'), store.cells('m', '1'), 'one set of cells per version')
  t.same(store.write('m', { loaded: true, reason: '' }), { name: 'm', generation: 1, loaded: true, reason: '' })
  t.same(store.write('m', { loaded: false, reason: 'unloaded' }), { name: 'm', generation: 1, loaded: false, reason: 'unloaded' })
  t.equal(store.records().get('m')?.generation, 1)
  t.equal(store.version, 2)
  store.onCheck()
  t.pass('nobody else writes it: there is nothing to check')
})

t.test('a store damaged under the processes: requests are served from what was read last; writes fail', async (t) => {
  const store = storePath(t)
  const registry = new Registry({ sharedRegistry: { path: store, checkIntervalMs: 10 } })
  t.teardown(() => registry.close())
  const table = new ModelTable([model()], { repository: true })
  table.serveWith(registry)
  const infer = inferOf(registry, table)
  t.equal(await infer(1), 'ok')
  table.unload('m')
  await table.load('m')
  truncateSync(`${store}-wal`, 0)
  // The store's next check has the records read again, from the damaged file.
  let checked = 0
  registry.modelStore().onCheck(() => { checked++ })
  let wait: NodeJS.Timeout | undefined
  await bounded(new Promise<void>((resolve) => { wait = setInterval(() => { if (checked >= 2) resolve() }, 5) }), 'two checks').finally(() => clearInterval(wait))
  t.equal(await infer(1), 'ok', 'a request that needs no shared memory is served')
  t.same(table.index(), [{ name: 'm', version: '1', state: 'READY' }])
  t.equal(table.metricVersions()[0].totals().pending, 0, 'the gauge, of this process alone')
  await t.rejects(table.unload('m'), { code: 'ERR_SHM_STORE_FAILED' }, 'a change cannot be made')
})

t.test('a block whose writer died in the middle of a change is read as it is, once waited for', async (t) => {
  const { own } = new MemoryModelStore().cells('m', '1')
  changeBlock(own, () => { own[CELL.executionCount] = 3 })
  t.equal(changeCounter(own)[0], 2, 'a change is marked before and after')
  t.equal(readBlock(own)[CELL.executionCount], 3)
  // What a writer leaves when it dies between the two marks.
  Atomics.add(changeCounter(own), 0, 1)
  own[CELL.executionCount]++
  t.equal(readBlock(own)[CELL.executionCount], 4, 'never waited for beyond its bound')
  own[CELL.executionCount]++
  t.equal(readBlock(own)[CELL.executionCount], 5, 'from then on taken as it is')

  // The process that takes the dead one's slot closes its mark: its own changes are read whole.
  const path = `${storePath(t)}-statistics`
  const table = new StatisticsTable(path)
  t.teardown(() => { table.close(); StatisticsTable.remove(path) })
  const dead = table.own(0, 0)
  Atomics.add(changeCounter(dead), 0, 1)
  const taken = table.own(0, 0)
  t.equal(changeCounter(taken)[0] % 2, 0, 'the mark closed')
  changeBlock(taken, () => { taken[CELL.executionCount] = 7 })
  t.equal(readBlock(taken)[CELL.executionCount], 7)
})
