/**
 * `WORKERS=4 npm run example:server` as a real process tree: four node:cluster workers on one port
 * sharing one registry. Triton's simple_http_shm_client flow passes with every call on a new
 * connection, and the calls land on several workers (each worker's request log line carries its
 * pid); a worker killed with SIGKILL is replaced, and the new one serves what was registered
 * before; SIGTERM stops the workers, then the primary removes the store's directory.
 */
import diagnostics from 'node:diagnostics_channel'
import { once } from 'node:events'
import { existsSync, readFileSync, rmSync, statSync, truncateSync } from 'node:fs'
import http from 'node:http'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { isDeepStrictEqual } from 'node:util'
import t, { type Test } from 'tap'
import { randomSuffix, runClient } from '../example/client'
import { KServeClient } from '../lib/index'
import { makeObject, removeLeftoversOnTeardown, shmLeftovers } from './helpers/shm'
import { ServiceLog, spawnServiceGroup } from './helpers/service-log'
import { bounded, PATIENCE_MS } from './helpers/sync'

/** Four workers each compile the example and load its models and ONNX Runtime: beside the rest of
 * the suite on two busy cores, that has taken over a minute. The bound only ends a broken run. */
const STARTUP_PATIENCE_MS = 5 * PATIENCE_MS

const LISTENING = /^Server listening at (http:\/\/127\.0\.0\.1:\d+)$/
/** Each call of the client on a connection of its own. */
const FRESH_CONNECTIONS = { connection: 'close' }

class Service extends ServiceLog {
  /** The pids of the workers that logged the start of requests, from line `from` on. */
  requestPids (from: number): number[] {
    return this.lines.slice(from).filter((line) => line.msg === 'incoming request').map((line) => line.pid)
  }
}

/** The example service, its primary and workers, killed whole on teardown. */
const startService = (t: Test, env: Record<string, string>): Service => new Service(spawnServiceGroup(t, env))

const isRunning = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

/** Counts what fetch does while `action` runs: requests sent, and connections opened. */
async function countingConnections<T> (action: () => Promise<T>): Promise<{ result: T, requests: number, connections: number }> {
  let requests = 0
  let connections = 0
  const onRequest = () => { requests++ }
  const onConnection = () => { connections++ }
  diagnostics.subscribe('undici:request:create', onRequest)
  diagnostics.subscribe('undici:client:connected', onConnection)
  try {
    return { result: await action(), requests, connections }
  } finally {
    diagnostics.unsubscribe('undici:request:create', onRequest)
    diagnostics.unsubscribe('undici:client:connected', onConnection)
  }
}

t.test('WORKERS=4: one port, one registry, a dead worker replaced, everything removed at exit', async (t) => {
  const service = startService(t, { WORKERS: '4' })
  const exited = once(service.child, 'close')
  const [start] = await service.until((line) => line.msg === 'starting workers that share one registry', 'the primary never started')
  const directory = path.dirname(start.store!)
  t.teardown(() => rmSync(directory, { recursive: true, force: true })) // if the primary could not
  t.equal(path.dirname(directory), os.tmpdir(), 'the store is in a directory of the temporary directory')
  t.equal(statSync(directory).mode & 0o777, 0o700, 'which only this user can enter')

  const listening = await service.until((line) => LISTENING.test(line.msg), 'the 4 workers never all listened', 4, STARTUP_PATIENCE_MS)
  const workers = new Set(listening.map((line) => line.pid))
  t.equal(workers.size, 4, 'four worker processes')
  t.notOk(workers.has(service.child.pid!), 'the primary serves nothing itself')
  const baseUrl = LISTENING.exec(listening[0].msg)![1]
  t.same(new Set(listening.map((line) => LISTENING.exec(line.msg)![1])), new Set([baseUrl]), 'all on one port')

  const suffix = randomSuffix()
  removeLeftoversOnTeardown(t, suffix)
  const before = service.lines.length
  const { result: run, requests, connections } = await countingConnections(() =>
    runClient(baseUrl, { keySuffix: suffix, headers: FRESH_CONNECTIONS }))
  t.equal(run.ok, true, 'Triton\'s flow passed, every result checked', { transcript: run.transcript })
  t.ok(requests >= 10, `the flow made ${requests} calls`)
  t.equal(connections, requests, 'each call on a new connection')
  await service.until(() => service.requestPids(before).length >= requests, 'every call logged by the worker that served it')
  const served = new Set(service.requestPids(before))
  t.ok(served.size > 1, `the calls landed on ${served.size} workers`)
  t.ok([...served].every((pid) => workers.has(pid)), 'all of them workers')

  // A registration made before a worker dies is served by the worker that replaces it.
  const client = new KServeClient(baseUrl, { headers: FRESH_CONNECTIONS })
  const key = makeObject(t, 4096, 'cluster')
  const region = `survivor${suffix}`
  await client.registerSystemSharedMemory(region, key, 4096)
  const [victim] = workers
  process.kill(victim, 'SIGKILL')
  const [died] = await service.until((line) => line.msg === 'worker died; starting another' && line.workerPid === victim,
    'the primary never noticed the killed worker')
  t.match(died, { code: null, signal: 'SIGKILL' }, 'logged with its pid and signal')
  const [replacement] = await service.until((line) => LISTENING.test(line.msg) && !workers.has(line.pid), 'no new worker listened', 1, STARTUP_PATIENCE_MS)
  t.equal(LISTENING.exec(replacement.msg)![1], baseUrl, 'on the same port')
  workers.delete(victim)
  workers.add(replacement.pid)

  // Each connection is accepted by whichever worker takes it first (the kernel's choice, see
  // example/cluster.ts): calls go on until the new one has answered one.
  const asked = service.lines.length
  const answeredByReplacement = () => service.requestPids(asked).includes(replacement.pid)
  const listedEverywhere = async () => {
    for (let call = 0; !answeredByReplacement(); call++) {
      const listed = await client.systemSharedMemoryStatus(region)
      if (!isDeepStrictEqual(listed, [{ name: region, key, offset: 0, byte_size: 4096 }])) throw new Error(`call ${call}: ${JSON.stringify(listed)}`)
      // Its log line may come after the response: the calls stop once it is written.
      await service.until(() => service.requestPids(asked).length > call, `call ${call} logged`)
    }
  }
  await bounded(listedEverywhere(), 'the new worker answered no call')
  t.pass('the new worker answered, with the registration made before it started')
  await client.unregisterSystemSharedMemory(region)
  const again = await runClient(baseUrl, { keySuffix: suffix, headers: FRESH_CONNECTIONS })
  t.equal(again.ok, true, 'and the flow passes again', { transcript: again.transcript })

  service.child.kill('SIGTERM')
  const [code] = await bounded(exited, 'the primary did not exit') as [number | null]
  t.equal(code, 0, 'the primary exited 0 on SIGTERM', { output: service.other })
  const stopped = service.lines.filter((line) => line.msg === 'worker stopped').map((line) => line.workerPid)
  t.same(new Set(stopped), workers, 'every worker was stopped')
  t.notOk([...workers].some(isRunning), 'and is gone')
  t.notOk(existsSync(directory), 'the store\'s directory was removed')
  t.same(shmLeftovers(suffix), [], 'the client removed its objects')
})

t.test('a WORKERS value that is not a number of processes is refused with a clear message', async (t) => {
  for (const value of ['0', 'four', '2.5', '1000']) {
    const service = startService(t, { WORKERS: value })
    const [code] = await bounded(once(service.child, 'close'), `WORKERS=${value}: the service did not exit`) as [number | null]
    t.equal(code, 1, `WORKERS=${value}`)
    t.equal(service.other, `WORKERS must be a whole number of processes from 1 to 256, got '${value}'\n`)
  }
})

/** The objects of the shm directory that these processes map now. */
function shmObjectsMappedBy (pids: number[]): string[] {
  const paths = pids.flatMap((pid) => readFileSync(`/proc/${pid}/maps`, 'utf8').split('\n'))
    .map((line) => /\s(\/dev\/shm\/\S+)/.exec(line)?.[1]).filter((found) => found !== undefined)
  return [...new Set(paths)]
}

/** The example's `simple` on one connection of its own: INPUT0 = 0..15, INPUT1 = 1s. */
function inferSimple (baseUrl: string): Promise<{ statusCode: number, body: string }> {
  const body = JSON.stringify({
    inputs: [
      { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: [...Array(16).keys()] },
      { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: Array(16).fill(1) }
    ]
  })
  const { port } = new URL(baseUrl)
  return new Promise((resolve, reject) => {
    const request = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/v2/models/simple/infer', agent: false, headers: { connection: 'close' } },
      (response) => {
        let text = ''
        response.setEncoding('utf8')
        response.on('data', (chunk: string) => { text += chunk })
        response.on('end', () => resolve({ statusCode: response.statusCode ?? 0, body: text }))
      })
    request.on('error', reject)
    request.end(body)
  })
}

const SUMS = Array.from({ length: 16 }, (_, index) => index + 1)

/** Starts the service and waits until its `workers` workers listen: their pids, its address and the store's directory. */
async function startedService (t: Test, workers: number, env: Record<string, string> = {}) {
  const service = startService(t, { WORKERS: String(workers), ...env })
  const exited = once(service.child, 'close')
  const [start] = await service.until((line) => line.msg === 'starting workers that share one registry', 'the primary never started')
  const directory = path.dirname(start.store!)
  t.teardown(() => rmSync(directory, { recursive: true, force: true })) // if the primary could not
  const listening = await service.until((line) => LISTENING.test(line.msg), `the ${workers} workers never all listened`, workers, STARTUP_PATIENCE_MS)
  return { service, exited, directory, pids: listening.map((line) => line.pid), baseUrl: LISTENING.exec(listening[0].msg)![1] }
}

for (const [workers, signal] of [[2, 'SIGTERM'], [4, 'SIGINT']] as const) {
  t.test(`WORKERS=${workers}: ${signal} to the whole process group with 4 inferences in flight: all answered, nothing left`, async (t) => {
    // Each inference waits a second in its model: the signal comes while all four are in flight.
    const { service, exited, directory, pids, baseUrl } = await startedService(t, workers, { EXAMPLE_MODEL_DELAY_MS: '1000' })
    const mapped = shmObjectsMappedBy(pids)
    t.teardown(() => { for (const object of mapped) rmSync(object, { force: true }) }) // if a worker could not
    const before = service.lines.length
    const inferences = Array.from({ length: 4 }, () => inferSimple(baseUrl).catch((error: Error) => ({ statusCode: 0, body: error.message })))
    await service.until(() => service.requestPids(before).length >= 4, 'the 4 inferences never all arrived')
    // As Ctrl-C and systemd's KillMode=control-group do: every process of the group gets it at once,
    // and each worker gets the primary's SIGTERM as well. Once they all began to close, the same
    // again (a second Ctrl-C): a stop under way must not be cut short by any later signal.
    process.kill(-service.child.pid!, signal)
    await service.until((line) => line.msg === 'shutting down', 'the workers never began to close', workers)
    await service.until((line) => line.msg === 'stopping the workers', 'the primary never began to stop')
    process.kill(-service.child.pid!, signal)

    const answers = await bounded(Promise.all(inferences), 'the inferences in flight were never answered')
    for (const [index, answer] of answers.entries()) {
      t.equal(answer.statusCode, 200, `inference ${index}: ${answer.body}`)
      t.same(JSON.parse(answer.body).outputs?.[0]?.data, SUMS, `inference ${index}: its result`)
    }
    const [code] = await bounded(exited, 'the primary did not exit') as [number | null]
    t.equal(code, 0, 'the primary exited 0', { output: service.other })
    const stopped = service.lines.filter((line) => line.msg === 'worker stopped')
    t.same(new Set(stopped.map((line) => line.workerPid)), new Set(pids), 'every worker was stopped')
    t.ok(stopped.every((line) => line.code === 0), 'each one exited 0, having closed', { stopped })
    t.notOk(pids.some(isRunning), 'and is gone')
    t.notOk(existsSync(directory), 'the store\'s directory was removed')
    t.same(mapped.filter((object) => existsSync(object)), [], 'nothing the service mapped in /dev/shm is left')
  })
}

/** The pids of a process's children now. */
const childrenOf = (pid: number): number[] =>
  readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').split(' ').filter((word) => word !== '').map(Number)

/** The primary's first `count` children, as soon as it forked them: nothing announces a fork, so
 * /proc is looked at every few milliseconds. */
async function forked (primary: number, count: number): Promise<number[]> {
  const deadline = Date.now() + PATIENCE_MS
  while (childrenOf(primary).length < count) {
    if (Date.now() > deadline) throw new Error(`the primary never forked ${count} workers`)
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
  return childrenOf(primary)
}

t.test('a worker killed by a signal before it listened is started again, after a delay', async (t) => {
  const service = startService(t, { WORKERS: '2' })
  const exited = once(service.child, 'close')
  const [start] = await service.until((line) => line.msg === 'starting workers that share one registry', 'the primary never started')
  t.teardown(() => rmSync(path.dirname(start.store!), { recursive: true, force: true }))
  // Killed while starting (loading their models takes seconds), as an out-of-memory kill does.
  const victims = await forked(service.child.pid!, 2)
  for (const victim of victims) process.kill(victim, 'SIGKILL')
  const restarted = await service.until((line) => line.msg === 'worker exited before it listened; starting another', 'the killed workers were not restarted', 2)
  t.same(new Set(restarted.map((line) => line.workerPid)), new Set(victims), 'both killed workers noticed')
  t.ok(restarted.every((line) => line.signal === 'SIGKILL' && line.code === null), 'with the signal that killed them')
  t.same(restarted.map((line) => (line as { delayMs?: number }).delayMs), [100, 200], 'each death in a row doubles the delay')

  const listening = await service.until((line) => LISTENING.test(line.msg), 'the new workers never listened', 2, STARTUP_PATIENCE_MS)
  t.notOk(listening.some((line) => victims.includes(line.pid)), 'two new workers serve')
  const answer = await inferSimple(LISTENING.exec(listening[0].msg)![1])
  t.equal(answer.statusCode, 200, answer.body)
  service.child.kill('SIGTERM')
  const [code] = await bounded(exited, 'the primary did not exit') as [number | null]
  t.equal(code, 0, 'a clean stop', { output: service.other })
})

t.test('a worker failing of its own before any worker listened stops the service', async (t) => {
  // A request timeout Fastify refuses: every worker would fail the same way.
  const service = startService(t, { WORKERS: '2', EXAMPLE_REQUEST_TIMEOUT_MS: '-1' })
  const [start] = await service.until((line) => line.msg === 'starting workers that share one registry', 'the primary never started')
  const [code] = await bounded(once(service.child, 'close'), 'the primary did not exit') as [number | null]
  t.equal(code, 1, 'the primary exits 1')
  t.match(service.lines.find((line) => line.msg === 'worker exited before it listened; stopping the service'), { code: 1, signal: null })
  t.notOk(service.lines.some((line) => line.msg.includes('starting another')), 'no worker was started again')
  t.notOk(existsSync(path.dirname(start.store!)), 'the store\'s directory was removed')
})

t.test('WORKERS=2, a store damaged under the service: requests that meet it get 500, the rest is served, nothing stops', async (t) => {
  const { service, exited, directory, pids, baseUrl } = await startedService(t, 2)
  const client = new KServeClient(baseUrl, { headers: FRESH_CONNECTIONS })
  const key = makeObject(t, 4096, 'damaged')
  for (const name of ['a', 'b', 'c']) await client.registerSystemSharedMemory(name, key, 4096)
  truncateSync(path.join(directory, 'registry.db-wal'), 0)

  // A worker that dies now is replaced by one that cannot open the store: it is tried again
  // later, and the survivor goes on serving meanwhile.
  const [victim, survivor] = pids
  process.kill(victim, 'SIGKILL')
  await service.until((line) => line.msg === 'worker died; starting another' && line.workerPid === victim, 'the primary never noticed the killed worker')
  const [failed] = await service.until((line) => line.msg === 'worker exited before it listened; starting another',
    'the replacement was not tried again', 1, STARTUP_PATIENCE_MS)
  t.match(failed, { code: 1, signal: null }, 'the replacement failed of its own, and another is on its way')
  // Said on the worker's stderr, which may come after the primary's log line.
  await service.untilPrinted(/cannot open the shared registry store/, 'the replacement never said why')
  t.pass('saying why')

  for (let call = 0; call < 4; call++) {
    const answer = await inferSimple(baseUrl)
    t.equal(answer.statusCode, 200, `inference ${call}, served by the survivor: ${answer.body}`)
  }
  await t.rejects(client.registerSystemSharedMemory('d', key, 4096), { statusCode: 500, message: 'the shared memory registry is unavailable, try again' },
    'a register meets the damaged store')
  t.ok(isRunning(survivor), 'the survivor lives')
  t.notOk(service.lines.some((line) => line.msg === 'worker exited before it listened; stopping the service'), 'the service was never stopped')

  service.child.kill('SIGTERM')
  const [code] = await bounded(exited, 'the primary did not exit') as [number | null]
  t.equal(code, 0, 'a clean stop', { output: service.other })
  t.notOk(existsSync(directory), 'the store\'s directory was removed')
})

/** A port free on 127.0.0.1 now (the service is given it, to be found on it again after a restart). */
async function freePort (): Promise<number> {
  const server = net.createServer().listen(0, '127.0.0.1')
  await once(server, 'listening')
  const { port } = server.address() as net.AddressInfo
  server.close()
  await once(server, 'close')
  return port
}

/** How long a client waits for an answer before it gives up, as Triton's clients and fetch do. */
const CLIENT_TIMEOUT_MS = 30_000

/** What one GET on a connection of its own gets: 'served <status>', the error that ended it
 * (ECONNREFUSED, ECONNRESET...), or 'timed out' after CLIENT_TIMEOUT_MS without either. */
function outcomeOf (port: number, url: string): Promise<string> {
  return new Promise((resolve) => {
    const request = http.get({ host: '127.0.0.1', port, path: url, agent: false, timeout: CLIENT_TIMEOUT_MS }, (response) => {
      response.resume()
      response.on('end', () => resolve(`served ${response.statusCode}`))
    })
    request.on('timeout', () => {
      resolve('timed out')
      request.destroy()
    })
    request.on('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message))
  })
}

t.test('WORKERS=2, every worker killed at once: the next request is answered at once, and the new workers serve on the same port', async (t) => {
  const port = await freePort()
  const { service, exited, pids } = await startedService(t, 2, { PORT: String(port) })
  // As an out-of-memory kill of the whole service's workers, or a bug that crashes each one alike.
  for (const pid of pids) process.kill(pid, 'SIGKILL')
  const sent = performance.now()
  const outcome = await outcomeOf(port, '/v2/health/live')
  const waitedMs = Math.round(performance.now() - sent)
  t.not(outcome, 'timed out', `the request sent as they died was answered (${outcome}) after ${waitedMs} ms`)
  t.ok(waitedMs < CLIENT_TIMEOUT_MS / 2, 'well before the client would have given up')

  const listening = await service.until((line) => LISTENING.test(line.msg) && !pids.includes(line.pid), 'no new worker listened', 2, STARTUP_PATIENCE_MS)
  t.same(new Set(listening.map((line) => LISTENING.exec(line.msg)![1])), new Set([`http://127.0.0.1:${port}`]), 'the new workers listen on the same port')
  t.equal(await outcomeOf(port, '/v2/health/live'), 'served 200', 'and serve')
  service.child.kill('SIGTERM')
  const [code] = await bounded(exited, 'the primary did not exit') as [number | null]
  t.equal(code, 0, 'a clean stop', { output: service.other })
})
