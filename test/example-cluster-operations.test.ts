/**
 * The example service at WORKERS=2 operated as Triton is: inferences over HTTP and gRPC at once,
 * then the statistics asked of every worker (each answers the whole service's), a worker killed
 * (its requests still count), Triton's metrics on METRICS_PORT, and a model unloaded and loaded
 * again through the repository extension, seen by every worker.
 */
import { once } from 'node:events'
import { rmSync } from 'node:fs'
import path from 'node:path'
import t, { type Test } from 'tap'
import type { ModelStatisticsResponse, RepositoryIndexEntry } from '../types'
import { grpcClient } from './helpers/grpc'
import { ServiceLog, spawnServiceGroup } from './helpers/service-log'
import { bounded, PATIENCE_MS } from './helpers/sync'

/** Two workers each compile the example and load its models and ONNX Runtime, beside the rest of
 * the suite: the bound only ends a broken run. */
const STARTUP_PATIENCE_MS = 5 * PATIENCE_MS
const LISTENING = /^Server listening at (http:\/\/127\.0\.0\.1:\d+)$/

class Service extends ServiceLog {
  /** The pids of the workers that logged a request for `url`, from line `from` on. */
  answeredBy (from: number, url: string): Set<number> {
    return new Set(this.lines.slice(from).filter((line) => line.msg === 'incoming request' && line.req?.url === url).map((line) => line.pid))
  }
}

async function startService (t: Test): Promise<{ service: Service, pids: number[], baseUrl: string, grpcPort: number, metricsPort: number }> {
  const child = spawnServiceGroup(t, { WORKERS: '2', METRICS_PORT: '0' })
  const service = new Service(child)
  const [start] = await service.until((line) => line.msg === 'starting workers that share one registry', 'the primary never started')
  t.teardown(() => rmSync(path.dirname(start.store!), { recursive: true, force: true })) // if the primary could not
  const listening = await service.until((line) => LISTENING.test(line.msg), 'the 2 workers never listened', 2, STARTUP_PATIENCE_MS)
  const [grpc] = await service.until((line) => line.msg === 'KServe gRPC listening', 'no gRPC listener', 2, STARTUP_PATIENCE_MS)
  const [metrics] = await service.until((line) => line.msg === 'Triton metrics listening', 'no metrics listener', 2, STARTUP_PATIENCE_MS)
  return { service, pids: listening.map((line) => line.pid), baseUrl: LISTENING.exec(listening[0].msg)![1], grpcPort: grpc.port!, metricsPort: metrics.port! }
}

const FRESH = { connection: 'close' }
const INPUT0 = [...Array(16).keys()]

/** `simple` over HTTP, on a connection of its own. */
async function inferHttp (baseUrl: string): Promise<string> {
  const response = await fetch(`${baseUrl}/v2/models/simple/infer`, {
    method: 'POST',
    headers: FRESH,
    body: JSON.stringify({
      inputs: [
        { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: INPUT0 },
        { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: Array(16).fill(1) }
      ]
    })
  })
  const answer = await response.json() as { outputs?: Array<{ data: number[] }>, error?: string }
  return response.ok ? String(answer.outputs?.[0].data[15]) : answer.error as string
}

/** `simple` over gRPC, on a channel (a connection) of its own. */
async function inferGrpc (t: Test, port: number): Promise<string> {
  const client = grpcClient(t, port)
  const bytes = (values: number[]) => Buffer.from(Int32Array.from(values).buffer)
  try {
    const response = await client.call('ModelInfer', {
      model_name: 'simple',
      inputs: ['INPUT0', 'INPUT1'].map((name) => ({ name, datatype: 'INT32', shape: [1, 16] })),
      raw_input_contents: [bytes(INPUT0), bytes(Array(16).fill(1))]
    })
    return String(new Int32Array(new Uint8Array(response.raw_output_contents[0]).buffer)[15])
  } catch (error) {
    return (error as { details: string }).details
  } finally {
    client.close()
  }
}

const STATS = '/v2/models/simple/stats'
const successesOf = (stats: ModelStatisticsResponse) => stats.model_stats[0].inference_stats.success.count

/**
 * Asks `ask` on new connections until every worker in `pids` has answered (each connection is
 * accepted by whichever worker takes it first: the kernel's choice), checking each answer.
 */
async function askEveryWorker<T> (service: Service, pids: number[], url: string, ask: () => Promise<T>, check: (answer: T, call: number) => void) {
  const from = service.lines.length
  const answered = () => pids.every((pid) => service.answeredBy(from, url).has(pid))
  await bounded((async () => {
    for (let call = 0; !answered(); call++) {
      check(await ask(), call)
      await service.until(() => service.lines.slice(from).filter((line) => line.msg === 'incoming request' && line.req?.url === url).length > call,
        `call ${call} logged`)
    }
  })(), `every worker answering ${url}`)
}

function metricValue (text: string, name: string, model: string): number | undefined {
  const line = text.split('\n').find((entry) => entry.startsWith(`${name}{model="${model}",version="1"} `))
  return line === undefined ? undefined : Number(line.split(' ')[1])
}

t.test('WORKERS=2: the statistics, metrics and repository of the whole service, whichever worker answers', async (t) => {
  const { service, pids, baseUrl, grpcPort, metricsPort } = await startService(t)
  const stats = async () => await (await fetch(baseUrl + STATS, { headers: FRESH })).json() as ModelStatisticsResponse

  // 30 over HTTP and 10 over gRPC, all at once.
  const answers = await Promise.all([
    ...Array.from({ length: 30 }, () => inferHttp(baseUrl)),
    ...Array.from({ length: 10 }, () => inferGrpc(t, grpcPort))
  ])
  t.same(answers, Array(40).fill('16'), 'every inference answered, over both transports')
  await askEveryWorker(service, pids, STATS, stats, (answer, call) => {
    if (successesOf(answer) !== 40) t.fail(`call ${call}: ${successesOf(answer)} successes`)
    t.equal(answer.model_stats[0].inference_stats.queue.count, 40)
  })
  t.pass('each worker answered 40: the requests of both')
  const scrape = async () => await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`, { headers: FRESH })).text()
  const metrics = await scrape()
  t.equal(metricValue(metrics, 'nv_inference_request_success', 'simple'), 40, 'Triton\'s metrics on METRICS_PORT, of the whole service')
  t.equal(metricValue(metrics, 'nv_inference_count', 'simple'), 40)
  t.equal(metricValue(metrics, 'nv_inference_exec_count', 'simple'), 40)
  t.match(metrics, /^# TYPE nv_inference_request_success counter$/m)
  t.equal(await (await fetch(`${baseUrl}/metrics`, { headers: FRESH })).text().then((text) => metricValue(text, 'nv_inference_request_success', 'simple')), 40,
    'and at /metrics of the HTTP port')

  // A worker killed: its requests still count, and the one that replaces it answers them too.
  const [victim, survivor] = pids
  process.kill(victim, 'SIGKILL')
  await service.until((line) => line.msg === 'worker died; starting another' && line.workerPid === victim, 'the primary never noticed the killed worker')
  const [replacement] = await service.until((line) => LISTENING.test(line.msg) && !pids.includes(line.pid), 'no new worker listened', 1, STARTUP_PATIENCE_MS)
  const more = await Promise.all([...Array.from({ length: 6 }, () => inferHttp(baseUrl)), ...Array.from({ length: 4 }, () => inferGrpc(t, grpcPort))])
  t.same(more, Array(10).fill('16'))
  const workers = [survivor, replacement.pid]
  await askEveryWorker(service, workers, STATS, stats, (answer, call) => {
    if (successesOf(answer) !== 50) t.fail(`call ${call}: ${successesOf(answer)} successes`)
  })
  t.pass('50 from each worker: the dead worker\'s requests, the replacement\'s and the survivor\'s')
  t.equal(metricValue(await scrape(), 'nv_inference_request_success', 'simple'), 50)

  // Unloaded through one worker: refused by every worker, over both transports; loaded over gRPC.
  const unload = await fetch(`${baseUrl}/v2/repository/models/simple/unload`, { method: 'POST', headers: FRESH })
  t.equal(unload.status, 200)
  const index = async () => await (await fetch(`${baseUrl}/v2/repository/index`, { method: 'POST', headers: FRESH })).json() as RepositoryIndexEntry[]
  await askEveryWorker(service, workers, '/v2/repository/index', index, (answer) => {
    t.same(answer.find((entry) => entry.name === 'simple'), { name: 'simple', version: '1', state: 'UNAVAILABLE', reason: 'unloaded' })
  })
  const refused = "Request for unknown model: 'simple' has no available versions"
  t.same(await Promise.all([inferHttp(baseUrl), inferHttp(baseUrl), inferGrpc(t, grpcPort), inferGrpc(t, grpcPort)]), Array(4).fill(refused))
  t.equal(metricValue(await scrape(), 'nv_inference_request_success', 'simple'), undefined, 'an unloaded model has no metrics, as in Triton')

  const client = grpcClient(t, grpcPort)
  t.same(await client.call('RepositoryModelLoad', { model_name: 'simple' }), {})
  client.close()
  // Each worker reads its ONNX graph again (its load hook): a request there waits for it.
  await askEveryWorker(service, workers, '/v2/models/simple/infer', () => inferHttp(baseUrl), (answer) => { t.equal(answer, '16') })
  await askEveryWorker(service, workers, '/v2/repository/index', index, (answer) => {
    t.same(answer.find((entry) => entry.name === 'simple'), { name: 'simple', version: '1', state: 'READY' })
  })
  t.same(await Promise.all([inferGrpc(t, grpcPort), inferGrpc(t, grpcPort)]), Array(2).fill('16'), 'loaded again everywhere')

  service.child.kill('SIGTERM')
  const [code] = await bounded(once(service.child, 'close'), 'the primary did not exit') as [number | null]
  t.equal(code, 0, 'the service stops', { output: service.other })
})
