/**
 * A model table served with a shared registry, across real processes: the statistics of every
 * process are in every process's answer, and stay there once a process dies; the pending gauge
 * counts live processes only; a load or unload in one process is seen by all, each running its
 * own hooks, an unload's only once that process's requests in flight have ended; statistics read
 * while another process counts are never of half a request.
 */
import t from 'tap'
import { ModelTable, Registry } from '../lib/index'
import type { ModelStatisticsResponse, RepositoryIndexEntry } from '../types'
import { type ModelPeer, startModelPeer } from './helpers/model-peer'
import { storePath } from './helpers/registry-peer'

type Totals = Array<{ name: string, version: string, success: number, pending: number, failures: Record<string, number> }>

const successes = (stats: ModelStatisticsResponse) => stats.model_stats.map(({ version, inference_stats: { success } }) => `${version}: ${success.count}`)
const batches = (stats: ModelStatisticsResponse) =>
  stats.model_stats[0].batch_stats.map(({ batch_size: size, compute_infer: { count } }) => `${size} x ${count}`)
const stateOf = (index: RepositoryIndexEntry[], name: string) =>
  index.filter((entry) => entry.name === name).map(({ version, state, reason }) => `${version} ${state}${reason === undefined ? '' : ` (${reason})`}`)

function isRunning (pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

async function statsOfAll (peers: ModelPeer[], command: object): Promise<ModelStatisticsResponse[]> {
  return Promise.all(peers.map((peer) => peer.call<ModelStatisticsResponse>(command)))
}

t.test('every process answers with the statistics of all of them, a dead one\'s included', async (t) => {
  const store = storePath(t)
  const [a, b] = [await startModelPeer(t, store), await startModelPeer(t, store)]
  // Both at once: each counts into its own cells while the other does.
  const [fromA, fromB] = await Promise.all([
    a.call<string[]>({ op: 'infer', model: 'add', batch: 1, count: 25 }),
    b.call<string[]>({ op: 'infer', model: 'add', batch: 2, count: 15 })
  ])
  t.same([fromA.filter((outcome) => outcome === 'ok').length, fromB.filter((outcome) => outcome === 'ok').length], [25, 15])
  await b.call({ op: 'infer', model: 'add', version: '1', batch: 3, count: 2 })
  t.same(await a.call({ op: 'infer', model: 'add', batch: 9, count: 1 }), ["inference request batch-size must be <= 8 for 'add'"], 'a failure')

  for (const stats of await statsOfAll([a, b], { op: 'stats', model: 'add' })) {
    t.same(successes(stats), ['1: 2', '2: 40'], 'version 1: b\'s 2; version 2 (the default): 25 + 15')
    t.equal(stats.model_stats[1].inference_count, 25 + 30)
    t.equal(stats.model_stats[1].inference_stats.fail.count, 1)
    t.equal(stats.model_stats[1].inference_stats.queue.count, 40, 'queue counts every success, as perf_analyzer needs')
    t.same(stats.model_stats[1].batch_stats.map(({ batch_size: size, compute_input: { count } }) => `${size} x ${count}`), ['1 x 25', '2 x 15'])
  }
  const [beforeA, beforeB] = await statsOfAll([a, b], { op: 'stats' })
  t.same(beforeA, beforeB, 'the same answer from each')

  await b.kill()
  const [afterDeath] = await statsOfAll([a], { op: 'stats', model: 'add' })
  t.same(successes(afterDeath), ['1: 2', '2: 40'], 'b died: its requests still count')

  // A new process may take b's slot: it adds to what b left.
  const c = await startModelPeer(t, store)
  await c.call({ op: 'infer', model: 'add', batch: 2, count: 5 })
  for (const stats of await statsOfAll([a, c], { op: 'stats', model: 'add', version: '2' })) {
    t.same(successes(stats), ['2: 45'])
    t.same(batches(stats), ['1 x 25', '2 x 20'], 'batch 2: b\'s 15 and c\'s 5')
  }
  const totals = await c.call<Totals>({ op: 'totals' })
  t.match(totals.find((entry) => entry.name === 'add' && entry.version === '2'), { success: 45, failures: { OTHER: 1, BACKEND: 0 } })
})

t.test('the pending gauge counts the requests of live processes only', async (t) => {
  const store = storePath(t)
  const [a, b] = [await startModelPeer(t, store), await startModelPeer(t, store)]
  const pending = async (peer: ModelPeer) => (await peer.call<Totals>({ op: 'totals' })).find((entry) => entry.name === 'gated')?.pending
  t.equal(await a.call({ op: 'hold', model: 'gated', id: 'pending', count: 2 }), 2)
  t.equal(await b.call({ op: 'hold', model: 'gated', id: 'pending', count: 1 }), 1)
  t.same([await pending(a), await pending(b)], [3, 3], 'three requests wait for their run, in two processes')
  await b.kill()
  t.equal(await pending(a), 2, 'the one of the dead process no longer waits')
  t.same(await a.call({ op: 'release' }), [null, null])
  t.equal(await pending(a), 0)
  t.same(successes(await a.call<ModelStatisticsResponse>({ op: 'stats', model: 'gated' })), ['1: 2'])
})

t.test('a load or an unload in one process is seen by every process, which runs its own hooks', async (t) => {
  const store = storePath(t)
  const [a, b] = [await startModelPeer(t, store), await startModelPeer(t, store)]
  const everywhere = async (name: string) => Promise.all([a, b].map(async (peer) => stateOf(await peer.call<RepositoryIndexEntry[]>({ op: 'index' }), name)))

  t.same(await everywhere('add'), [['1 READY', '2 READY'], ['1 READY', '2 READY']])
  await a.call({ op: 'unload', model: 'add' })
  t.same(await everywhere('add'), [['1 UNAVAILABLE (unloaded)', '2 UNAVAILABLE (unloaded)'], ['1 UNAVAILABLE (unloaded)', '2 UNAVAILABLE (unloaded)']])
  t.same(await b.call({ op: 'infer', model: 'add', batch: 1, count: 1 }), ["Request for unknown model: 'add' has no available versions"])
  t.same(await b.call({ op: 'infer', model: 'add', version: '1', batch: 1, count: 1 }), ["Request for unknown model: 'add' version 1 is not at ready state"])
  t.same(await b.call({ op: 'ready' }), { server: true, models: { add: false, plain: true, gated: true } }, 'an unloaded model keeps no server from being ready')
  t.same(await b.call({ op: 'hooks' }), ['unload add 1', 'unload add 2'], 'b ran its own unload hooks')
  t.same(await a.call({ op: 'hooks' }), ['unload add 1', 'unload add 2'])
  t.same(await b.call({ op: 'index', ready: true }).then((index) => stateOf(index as RepositoryIndexEntry[], 'add')), [], 'the ready ones only')

  // A load with a configuration and a file, which this table takes: every process's hooks get them.
  await b.call({ op: 'load', model: 'add', config: '{"max_batch_size":4}', files: { 'file:1/model.onnx': 'graph' } })
  t.same(await everywhere('add'), [['1 READY', '2 READY'], ['1 READY', '2 READY']])
  const loaded = 'load add 1 {"max_batch_size":4} file:1/model.onnx'
  t.same((await a.call<string[]>({ op: 'hooks' })).slice(2), [loaded, loaded.replace('add 1', 'add 2')], 'a ran its load hooks with the overrides')
  t.same(await a.call({ op: 'infer', model: 'add', batch: 1, count: 1 }), ['ok'])

  // A load whose hook fails in the process that asked: unavailable everywhere, with its reason.
  await a.call({ op: 'failLoads', on: true })
  await t.rejects(a.call({ op: 'load', model: 'add' }), {
    kind: 'invalid',
    code: 'ERR_SHM_LOAD_FAILED',
    message: "load failed for model 'add': version 1 is at UNAVAILABLE state: version 1 would not load;"
  })
  t.same(await everywhere('add'), Array(2).fill(['1 UNAVAILABLE (version 1 would not load)', '2 UNAVAILABLE (version 1 would not load)']))
  t.same(await b.call({ op: 'ready' }).then((ready) => (ready as { server: boolean }).server), false, 'a model that failed to load: the server is not ready')

  // A load whose hook fails in another process fails too, as Triton reports a failed load.
  await t.rejects(b.call({ op: 'load', model: 'add' }), {
    kind: 'invalid',
    code: 'ERR_SHM_LOAD_FAILED',
    message: "load failed for model 'add': version 1 is at UNAVAILABLE state: version 1 would not load;"
  }, 'b\'s load fails: a could not load its own copy')
  t.same(await everywhere('add'), Array(2).fill(['1 UNAVAILABLE (version 1 would not load)', '2 UNAVAILABLE (version 1 would not load)']),
    'unavailable in every process, b\'s copy unloaded again')
  t.same(await b.call({ op: 'infer', model: 'add', batch: 1, count: 1 }), ["Request for unknown model: 'add' has no available versions"])
  await a.call({ op: 'failLoads', on: false })
  await a.call({ op: 'load', model: 'add' })
  t.same(await everywhere('add'), Array(2).fill(['1 READY', '2 READY']), 'loaded again from a: everywhere')
})

t.test('an unload waits, in each process, for that process\'s requests in flight before its hook', async (t) => {
  const store = storePath(t)
  const [a, b] = [await startModelPeer(t, store), await startModelPeer(t, store)]
  t.equal(await b.call({ op: 'hold', model: 'gated', id: 'in-run', count: 1 }), 1)
  await a.call({ op: 'unload', model: 'gated' })
  t.same(await a.call({ op: 'hooks' }), ['unload gated 1'], 'a has nothing in flight: its hook ran')
  t.same(await b.call({ op: 'hooks' }), [], 'b waits for its request')
  t.same(await b.call({ op: 'infer', model: 'gated', batch: 1, count: 1 }), ["Request for unknown model: 'gated' has no available versions"],
    'new requests are refused meanwhile')
  t.same(await b.call({ op: 'release' }), [null], 'the request in flight finishes')
  t.same(await b.call({ op: 'hooks' }), ['unload gated 1'])
  await b.call({ op: 'load', model: 'gated' })
  t.same(successes(await a.call<ModelStatisticsResponse>({ op: 'stats', model: 'gated' })), ['1: 1'], 'it counted, in b, as a success')
})

t.test('statistics read while another process counts agree with themselves: every execution in batch_stats, and only those', async (t) => {
  const store = storePath(t)
  const writer = await startModelPeer(t, store)
  const registry = new Registry({ sharedRegistry: { path: store } })
  t.teardown(() => registry.close())
  const reader = new ModelTable([{ name: 'add', versions: ['1', '2'], maxBatchSize: 8, inputs: [], outputs: [], run () {} }])
  reader.serveWith(registry)
  const REQUESTS = 2000
  const writing = writer.call<string[]>({ op: 'infer', model: 'add', batch: 2, count: REQUESTS })
  // Read as fast as this process can, for as long as the other one counts (its counts are the end):
  // each answer must be of a moment between two of its requests.
  let reads = 0
  let seen = 0
  const torn: string[] = []
  const seenCounts = new Set<number>()
  while (seen < REQUESTS) {
    const [stats] = reader.statistics('add', '2').model_stats
    seen = stats.execution_count
    seenCounts.add(seen)
    const batched = stats.batch_stats.reduce((sum, batch) => sum + batch.compute_infer.count, 0)
    if (batched !== seen || stats.inference_count !== 2 * seen) torn.push(`${seen} executions, ${batched} in batch_stats, ${stats.inference_count} inferences`)
    // The writer's death would end the run: looked for now and then, never waited for.
    if (++reads % 1000 === 0 && !isRunning(writer.pid)) break
  }
  t.same((await writing).filter((outcome) => outcome !== 'ok'), [], 'the other process served every request')
  t.same(torn, [], `no answer showed half of a request (${reads} reads saw ${seenCounts.size} counts)`)
})
