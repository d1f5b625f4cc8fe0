/**
 * A model's instances (a declaration's `instanceCount`, Triton's `instance_group` count) over real
 * HTTP: at most that many of its requests run at once, the others wait in the order they came,
 * timed as queue; a request whose client goes away while it waits leaves the queue and never runs;
 * the configuration shows the count.
 */
import Fastify from 'fastify'
import t from 'tap'
import fastifyTritonShm, { kserveModels, type ModelDeclaration, ModelTable, type VersionMetrics } from '../lib/index'
import type { ModelConfigResponse } from '../types'
import { eventually, Gate } from './helpers/sync'

t.test('one instance: requests run one after another, in the order they came; one abandoned while it waits never runs', async (t) => {
  const gate = new Gate(false)
  const ran: number[] = []
  const model: ModelDeclaration = {
    name: 'one',
    instanceCount: 1,
    inputs: [{ name: 'IN', datatype: 'INT32', shape: [1] }],
    outputs: [{ name: 'OUT', datatype: 'INT32', shape: [1] }],
    async run (infer) {
      const value = infer.input<Int32Array>('IN').data[0]
      ran.push(value)
      await gate.pass()
      infer.output<Int32Array>('OUT', [1])[0] = value
    }
  }
  const table = new ModelTable([model, { ...model, name: 'any', instanceCount: undefined }])
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(fastifyTritonShm)
  await app.register(kserveModels, { models: table })
  const base = await app.listen({ host: '127.0.0.1', port: 0 })
  const infer = (name: string, value: number, signal?: AbortSignal) => fetch(`${base}/v2/models/${name}/infer`, {
    method: 'POST', body: JSON.stringify({ inputs: [{ name: 'IN', datatype: 'INT32', shape: [1], data: [value] }] }), signal
  })

  const first = infer('one', 1)
  await gate.untilHeld(1, 'the first request never ran')
  const abandoned = new AbortController()
  const second = infer('one', 2, abandoned.signal).catch((error: Error) => error)
  const third = infer('one', 3)
  const totals = () => (table.metricVersions().find(({ name }) => name === 'one') as VersionMetrics).totals()
  await eventually(() => totals().pending === 2, 'the second and third requests never waited for the instance')
  t.same(ran, [1], 'one run at a time')
  abandoned.abort()
  t.type(await second, Error)
  await eventually(() => totals().failures.CANCELED === 1, 'the abandoned request never left the queue')
  gate.open()
  t.same(await (await first).json(), { model_name: 'one', model_version: '1', outputs: [{ name: 'OUT', datatype: 'INT32', shape: [1], data: [1] }] })
  t.equal((await third).status, 200)
  t.same(ran, [1, 3], 'the abandoned request left the queue without running')
  const stats = table.statistics('one').model_stats[0].inference_stats
  t.same([stats.success.count, stats.fail.count, stats.queue.count], [2, 1, 2])
  t.ok(stats.queue.ns > 0, 'the wait for the instance is queue time')

  gate.close()
  const unlimited = [infer('any', 4), infer('any', 5)]
  await gate.untilHeld(2, 'without instanceCount, both run at once')
  gate.open()
  await Promise.all(unlimited)

  const config = (name: string) => app.inject(`/v2/models/${name}/config`).then((response) => (response.json() as ModelConfigResponse).instance_group[0].count)
  t.same([await config('one'), await config('any')], [1, 1])
  t.throws(() => new ModelTable([{ ...model, instanceCount: 0 }]), { code: 'ERR_SHM_INVALID_MODEL_DECLARATION', message: /'instanceCount' must be >= 1/ })
})

t.test('two instances: two runs at once, the third waits for one of them', async (t) => {
  const gate = new Gate(false)
  const table = new ModelTable([{
    name: 'two',
    instanceCount: 2,
    inputs: [],
    outputs: [],
    run: () => gate.pass()
  }])
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(fastifyTritonShm)
  await app.register(kserveModels, { models: table })
  const requests = [1, 2, 3].map(() => app.inject({ method: 'POST', url: '/v2/models/two/infer', payload: { inputs: [] } }))
  await gate.untilHeld(2)
  await eventually(() => table.metricVersions()[0].totals().pending === 1, 'the third request never waited')
  t.equal(gate.held, 2, 'the third waits')
  gate.open()
  t.same((await Promise.all(requests)).map(({ statusCode }) => statusCode), [200, 200, 200])
  t.equal((await app.inject('/v2/models/two/config')).json().instance_group[0].count, 2)
})
