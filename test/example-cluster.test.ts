/**
 * `WORKERS=4 npm run example:server` as a real process tree: four node:cluster workers on one port
 * sharing one registry. Triton's simple_http_shm_client flow passes with every call on a new
 * connection, and the calls land on several workers (each worker's request log line carries its
 * pid); a worker killed with SIGKILL is replaced, and the new one serves what was registered
 * before; SIGTERM stops the workers, then the primary removes the store's directory.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import diagnostics from 'node:diagnostics_channel'
import { EventEmitter, once } from 'node:events'
import { existsSync, rmSync, statSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { createInterface } from 'node:readline'
import t, { type Test } from 'tap'
import { randomSuffix, runClient } from '../example/client'
import { KServeClient } from '../lib/index'
import { makeObject, removeLeftoversOnTeardown, shmLeftovers } from './helpers/shm'
import { bounded, PATIENCE_MS, whenEvent } from './helpers/sync'

/** Four workers each compile the example and load its models and ONNX Runtime: beside the rest of
 * the suite on two busy cores, that has taken over a minute. The bound only ends a broken run. */
const STARTUP_PATIENCE_MS = 5 * PATIENCE_MS

const SERVER = path.join(__dirname, '..', 'example', 'server.ts')
const LISTENING = /^Server listening at (http:\/\/127\.0\.0\.1:\d+)$/
/** Each call of the client on a connection of its own. */
const FRESH_CONNECTIONS = { connection: 'close' }

interface LogLine {
  pid: number
  msg: string
  req?: { url: string, remotePort: number }
  workerPid?: number
  code?: number | null
  signal?: string | null
  store?: string
}

/** The service's process tree, and the JSON lines it logged so far. */
class Service extends EventEmitter {
  readonly lines: LogLine[] = []
  /** stderr, and stdout lines that are not JSON: shown when an assertion fails. */
  other = ''

  constructor (readonly child: ChildProcess) {
    super()
    createInterface({ input: child.stdout! }).on('line', (line) => {
      try {
        this.lines.push(JSON.parse(line) as LogLine)
      } catch {
        this.other += line + '\n'
      }
      this.emit('line')
    })
    child.stderr!.on('data', (chunk: Buffer) => { this.other += chunk.toString() })
  }

  /** Resolves with the logged lines that `select` picks, once there are `count` of them. */
  async until (select: (line: LogLine) => boolean, what: string, count = 1, ms = PATIENCE_MS): Promise<LogLine[]> {
    await whenEvent(this, 'line', () => this.lines.filter(select).length >= count, `${what}\n${this.other}`, ms)
    return this.lines.filter(select)
  }

  /** The pids of the workers that logged the start of requests, from line `from` on. */
  requestPids (from: number): number[] {
    return this.lines.slice(from).filter((line) => line.msg === 'incoming request').map((line) => line.pid)
  }
}

/** Starts `npm run example:server`'s script as its own process group, killed whole on teardown. */
function startService (t: Test, env: Record<string, string>): Service {
  const child = spawn(process.execPath, ['--import', 'tsx', SERVER], {
    // No coverage from it: tap would merge the numbers of its tsx-compiled code with this process's.
    env: { ...process.env, HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'info', _TAPJS_PROCESSINFO_COVERAGE_: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true
  })
  t.teardown(() => {
    try {
      process.kill(-child.pid!, 'SIGKILL')
    } catch {} // the whole group has exited already
  })
  return new Service(child)
}

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

  // Connections go to the workers in turn: within a few rounds the new one answers one.
  const asked = service.lines.length
  const answeredByReplacement = () => service.requestPids(asked).includes(replacement.pid)
  for (let call = 0; call < 40 && !answeredByReplacement(); call++) {
    t.same(await client.systemSharedMemoryStatus(region), [{ name: region, key, offset: 0, byte_size: 4096 }], `call ${call}: listed`)
  }
  await service.until(answeredByReplacement, 'the new worker answered none of 40 calls')
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
