/**
 * Tracing in a node:cluster service (real workers on one port, one shared registry): trace
 * settings changed through one worker apply in the other, and each worker writes its traces to a
 * file of its own (`<file>.pid<pid>`), a whole JSON array in Triton's format.
 */
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import http from 'node:http'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { createInterface } from 'node:readline'
import t, { type Test } from 'tap'
import { killGroup } from './helpers/process-group'
import { storePath } from './helpers/registry-peer'
import { bounded } from './helpers/sync'

const CLUSTER = path.join(__dirname, 'fixtures', 'trace-cluster.ts')

interface Answer { statusCode: number, worker: number, body: string }

/** A request on a connection of its own: node:cluster hands each new connection to the next worker. */
async function fresh (port: number, method: string, url: string, body?: string): Promise<Answer> {
  const request = http.request({ host: '127.0.0.1', port, method, path: url, agent: false, headers: { connection: 'close' } })
  request.end(body)
  const [response] = await bounded(once(request, 'response'), `${method} ${url}`) as [http.IncomingMessage]
  let text = ''
  for await (const chunk of response) text += chunk
  return { statusCode: response.statusCode as number, worker: Number(response.headers['x-worker-pid']), body: text }
}

/** Asks on fresh connections until a worker other than `not` answers (round robin: the next one). */
async function fromAnotherWorker (port: number, not: number, method: string, url: string): Promise<Answer> {
  for (let tries = 0; tries < 100; tries++) {
    const answer = await fresh(port, method, url)
    if (answer.worker !== not) return answer
  }
  throw new Error(`no worker but ${not} answered`)
}

async function startCluster (t: Test, store: string, traceFile: string) {
  const primary = spawn(process.execPath, ['--import', 'tsx', CLUSTER, store, traceFile, '2'], {
    env: { ...process.env, _TAPJS_PROCESSINFO_COVERAGE_: '0' },
    stdio: ['ignore', 'pipe', 'inherit'],
    detached: true
  })
  const exited = once(primary, 'exit')
  t.teardown(async () => {
    killGroup(primary.pid as number)
    await exited
  })
  const ended = exited.then(([code]) => { throw new Error(`the cluster ended (exit code ${code}) before listening`) })
  ended.catch(() => {})
  const [line] = await bounded(Promise.race([once(createInterface({ input: primary.stdout }), 'line'), ended]), 'the cluster listening')
  return { port: JSON.parse(line).port as number, stop: async () => { primary.kill('SIGTERM'); return (await bounded(exited, 'the cluster stopping'))[0] } }
}

t.test('settings changed through one worker apply in the other; each worker\'s traces are a whole array of a file of its own', async (t) => {
  const made = mkdtempSync(path.join(tmpdir(), 'trace-cluster-'))
  t.teardown(() => rmSync(made, { recursive: true, force: true }))
  const traceFile = path.join(made, 'trace.json')
  const { port, stop } = await startCluster(t, storePath(t), traceFile)

  const changed = await fresh(port, 'POST', '/v2/trace/setting', JSON.stringify({ trace_level: ['TIMESTAMPS'], trace_count: '40' }))
  t.equal(changed.statusCode, 200, changed.body)
  const other = await fromAnotherWorker(port, changed.worker, 'GET', '/v2/trace/setting')
  t.same(JSON.parse(other.body).trace_level, ['TIMESTAMPS'], `worker ${other.worker} traces too, as worker ${changed.worker} was told`)
  const model = await fresh(port, 'POST', '/v2/models/echo/trace/setting', JSON.stringify({ trace_rate: '2' }))
  const seen = await fromAnotherWorker(port, model.worker, 'GET', '/v2/models/echo/trace/setting')
  t.equal(JSON.parse(seen.body).trace_rate, '2', 'a model\'s setting too')
  await fresh(port, 'POST', '/v2/models/echo/trace/setting', JSON.stringify({ trace_rate: null }))

  const body = JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1], data: [5] }] })
  const answers = await Promise.all(Array.from({ length: 24 }, () => fresh(port, 'POST', '/v2/models/echo/infer', body)))
  t.ok(answers.every(({ statusCode }) => statusCode === 200), 'every inference answered')
  const workers = new Set(answers.map(({ worker }) => worker))
  t.equal(workers.size, 2, 'both workers ran requests')
  t.equal(await stop(), 0, 'the workers stopped, their traces written')

  t.notOk(existsSync(traceFile), 'no file is shared')
  const traced = [...workers].map((worker) => {
    const objects = JSON.parse(readFileSync(`${traceFile}.pid${worker}`, 'utf8')) as Array<{ id: number, model_name?: string }>
    return { worker, objects, ids: new Set(objects.map(({ id }) => id)) }
  })
  for (const { worker, objects, ids } of traced) {
    t.same([...ids].sort((a, b) => a - b), Array.from({ length: ids.size }, (_, index) => index + 1), `worker ${worker} numbers its own traces from 1`)
    t.equal(objects.filter(({ model_name: name }) => name === 'echo').length, ids.size, 'each trace with its description')
    t.equal(ids.size, answers.filter((answer) => answer.worker === worker).length, 'one trace per request it answered')
  }
})
