/**
 * `WORKERS=2 npm run example:server`, as one server to its clients: a sequence fed over
 * connections that reach different workers, over HTTP and gRPC, keeps one state (it runs in the
 * worker that started it); the owner killed, its sequences end with Triton's error, at once; a
 * model load or unload answered by one worker holds for the other the moment it returns.
 * Connections are kept alive, and the worker each one reached is read from the service's log.
 */
import http from 'node:http'
import { rmSync } from 'node:fs'
import path from 'node:path'
import t, { type Test } from 'tap'
import { grpcClient } from './helpers/grpc'
import { ServiceLog, spawnServiceGroup } from './helpers/service-log'
import { int32Bytes, int32s, sequenceParameters } from './helpers/stream'
import { bounded, PATIENCE_MS } from './helpers/sync'

/** Two workers each compile the example and load its models, beside the rest of the suite: the
 * bound only ends a broken run. */
const STARTUP_PATIENCE_MS = 5 * PATIENCE_MS
const LISTENING = /^Server listening at http:\/\/127\.0\.0\.1:(\d+)$/

interface Answer { status: number, body: string }

/** One kept-alive connection to the service, and the worker that accepted it. */
interface Connection {
  worker: number
  request(method: string, url: string, body?: object): Promise<Answer>
}

async function startService (t: Test) {
  const service = new ServiceLog(spawnServiceGroup(t, { WORKERS: '2' }))
  const [start] = await service.until((line) => line.msg === 'starting workers that share one registry', 'the primary never started')
  t.teardown(() => rmSync(path.dirname(start.store!), { recursive: true, force: true })) // if the primary could not
  const listening = await service.until((line) => LISTENING.test(line.msg), 'the 2 workers never listened', 2, STARTUP_PATIENCE_MS)
  const [grpc] = await service.until((line) => line.msg === 'KServe gRPC listening', 'no gRPC listener', 2, STARTUP_PATIENCE_MS)
  return { service, port: Number(LISTENING.exec(listening[0].msg)![1]), grpcPort: grpc.port!, workers: listening.map((line) => line.pid) }
}

let probes = 0

/** A new kept-alive connection, and which worker took it: a probe on it is logged with its pid. */
async function connect (t: Test, service: ServiceLog, port: number): Promise<Connection> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
  t.teardown(() => agent.destroy())
  const request = (method: string, url: string, body?: object) => new Promise<Answer>((resolve, reject) => {
    const sent = http.request({ host: '127.0.0.1', port, method, path: url, agent }, (response) => {
      let text = ''
      response.on('data', (chunk) => { text += chunk })
      response.on('end', () => resolve({ status: response.statusCode as number, body: text }))
    })
    sent.on('error', reject)
    sent.end(body === undefined ? undefined : JSON.stringify(body))
  })
  const probe = `/v2/health/live?probe=${probes++}`
  await request('GET', probe)
  const [line] = await service.until((logged) => logged.msg === 'incoming request' && logged.req?.url === probe, `the probe ${probe} logged`)
  return { worker: line.pid, request }
}

/** One kept-alive connection to each worker: new ones are opened until each worker took one (the
 * kernel, not the test, picks the worker of each). */
async function oneConnectionPerWorker (t: Test, service: ServiceLog, port: number, workers: number[]): Promise<Connection[]> {
  const found = new Map<number, Connection>()
  await bounded((async () => {
    while (found.size < workers.length) {
      const connection = await connect(t, service, port)
      if (!found.has(connection.worker)) found.set(connection.worker, connection)
    }
  })(), 'a connection to each worker')
  return workers.map((worker) => found.get(worker) as Connection)
}

/** `simple_string_dyna_sequence`: an accumulator per sequence (set by a START, added to by each
 * request, plus the id at the END), as Triton's QA serves it. */
const sequenceRequest = (value: number, id: string, start = false, end = false) => ({
  parameters: { sequence_id: id, ...(start && { sequence_start: true }), ...(end && { sequence_end: true }) },
  inputs: [{ name: 'INPUT', datatype: 'INT32', shape: [1, 1], data: [value] }]
})

async function accumulate (connection: Connection, value: number, id: string, start = false, end = false): Promise<number | string> {
  const { status, body } = await connection.request('POST', '/v2/models/simple_string_dyna_sequence/infer', sequenceRequest(value, id, start, end))
  return status === 200 ? JSON.parse(body).outputs[0].data[0] as number : `${status} ${JSON.parse(body).error as string}`
}

t.test('WORKERS=2: a sequence over connections to both workers and over gRPC keeps one state; its owner killed, it ends at once', async (t) => {
  const { service, port, grpcPort, workers } = await startService(t)
  const [first, second] = await oneConnectionPerWorker(t, service, port, workers)
  t.not(first.worker, second.worker, 'a kept-alive connection to each worker')
  const client = grpcClient(t, grpcPort)
  const overGrpc = async (value: number, id: string, end = false) => {
    const response = await client.call('ModelInfer', {
      model_name: 'simple_string_dyna_sequence',
      inputs: [{ name: 'INPUT', datatype: 'INT32', shape: [1, 1] }],
      raw_input_contents: [int32Bytes([value])],
      parameters: sequenceParameters(id, false, end)
    })
    return int32s(response.raw_output_contents[0])[0]
  }

  t.equal(await accumulate(first, 10, '1001', true), 10, 'started on the first worker')
  t.equal(await accumulate(second, 1, '1001'), 11, 'continued on the second: one state')
  t.equal(await overGrpc(2, '1001'), 13, 'over gRPC, whichever worker its connection reached')
  t.equal(await accumulate(first, 3, '1001'), 16)
  t.equal(await accumulate(second, 4, '1001', false, true), 20 + 1001, 'ended on the second, with the id added as the model does')
  t.equal(await accumulate(second, 1, '1001'),
    "400 inference request for sequence 1001 to model 'simple_string_dyna_sequence' must specify the START flag on the first request of the sequence",
    'ended for every worker')

  t.equal(await accumulate(second, 100, '2002', true), 100, 'a sequence the second worker starts')
  t.equal(await overGrpc(5, '2002'), 105)
  t.equal(await accumulate(first, 5, '2002'), 110)
  // Its owner dies: the sequence with it.
  process.kill(second.worker, 'SIGKILL')
  await service.until((line) => line.msg === 'worker died; starting another' && line.workerPid === second.worker, 'the primary never noticed')
  t.equal(await accumulate(first, 1, '2002'),
    "400 inference request for sequence 2002 to model 'simple_string_dyna_sequence' must specify the START flag on the first request of the sequence",
    'a request of it gets Triton\'s error for a sequence that is not there, at once')
  t.equal(await accumulate(first, 7, '2002', true), 7, 'and it can start again')
})

t.test('WORKERS=2: a load or an unload that one worker answered holds on the other at once, over HTTP and gRPC', async (t) => {
  const { service, port, grpcPort, workers } = await startService(t)
  const [first, second] = await oneConnectionPerWorker(t, service, port, workers)
  const client = grpcClient(t, grpcPort)
  const ready = async (connection: Connection) => (await connection.request('GET', '/v2/models/simple/ready')).status
  for (let round = 0; round < 5; round++) {
    const [asked, other] = round % 2 === 0 ? [first, second] : [second, first]
    t.equal((await asked.request('POST', '/v2/repository/models/simple/unload', {})).status, 200)
    t.same([await ready(other), await ready(asked)], [400, 400], `round ${round}: unloaded on both workers when the unload returned`)
    t.equal((await client.call('ModelReady', { name: 'simple' })).ready, false, 'and over gRPC')
    t.equal((await asked.request('POST', '/v2/repository/models/simple/load', {})).status, 200)
    t.same([await ready(other), await ready(asked)], [200, 200], `round ${round}: ready on both workers when the load returned`)
    t.equal((await client.call('ModelReady', { name: 'simple' })).ready, true, 'and over gRPC')
  }
  // The same asked over gRPC, whichever worker its connection reached.
  await client.call('RepositoryModelUnload', { model_name: 'simple' })
  t.same([await ready(first), await ready(second)], [400, 400], 'a gRPC unload: refused on both at once')
  await client.call('RepositoryModelLoad', { model_name: 'simple' })
  t.same([await ready(first), await ready(second)], [200, 200], 'a gRPC load: ready on both at once')
})
