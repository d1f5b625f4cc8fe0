/**
 * What several processes give and cost a service:
 *   - `workersThroughputRatio`: add_sub_fp32 with 16-element tensors (Triton's `simple`'s size) in
 *     shared memory, req/s of the bench server run as 2 node:cluster workers (the example's
 *     `WORKERS=2`: one port, one shared registry, the kernel spreading connections) / as one
 *     process, both loaded alike from this process (which shares the cores) by the lean pipelined
 *     generator (bench/pipelined-load.ts): its CPU per request bounds the ratio, and is reported
 *     with the server's.
 *   - `forwardedSequenceCostRatio`: a request of a sequence that another process owns, handed to it
 *     and answered back, against one its owner serves itself: the server CPU per request, of both
 *     processes together (two bench servers of one store), `simple_dyna_sequence` with JSON data,
 *     one request at a time, as a sequence's client sends them.
 * Rounds alternate between the cases (ABBA), so a busy machine slows each alike.
 */
import { KServeClient } from '../lib/index'
import { progress } from './format'
import { type InferFixture, makeFixture } from './infer-fixtures'
import { type LoadRequest, runLoad } from './load'
import { runPipelinedLoad } from './pipelined-load'
import { processTreeCpuMicros } from './process-tree-cpu'
import { ServerProcess } from './server-process'
import { tmpfsStorePath } from './shared-registry'
import { median } from './stats'

const TENSOR_BYTES = 64

export interface WorkersPlan {
  rounds: number
  secondsPerRun: number
  connections: number
  pipelining: number
  /** Requests sent to each server before the rounds, unmeasured. */
  warmupRequests: number
}

export interface WorkersResult {
  tensorBytes: number
  requestsPerSecond: { one: number, two: number }
  /** req/s with two workers / one process, median of the rounds' pairs. */
  throughputRatio: number
  /** Server CPU per request, microseconds, every process of it (the primary and its workers too). */
  serverCpuMicrosPerRequest: { one: number, two: number }
  /**
   * The load generator's CPU per request, microseconds, both cases: it runs on the same cores, so
   * with the server's `s` (one process) and `s2` (two workers), two workers serve at most 2s / (s2 + this) times what one does.
   */
  generatorCpuMicrosPerRequest: number
  sequence: {
    /** Server CPU per request, microseconds, both processes: served by the owner / handed to it. */
    cpuMicrosPerRequest: { local: number, forwarded: number }
    requestsPerSecond: { local: number, forwarded: number }
    /** Forwarded / local CPU per request, median of the rounds' pairs. */
    costRatio: number
  }
}

interface Run { requests: number, seconds: number, cpuMicros: number }
/** `cpuMicros`: the server's, every process of it; `generatorCpuMicros`: the load generator's. */
interface ThroughputRun extends Run { generatorCpuMicros: number }

const rate = (runs: Run[]) => runs.reduce((total, run) => total + run.requests, 0) / runs.reduce((total, run) => total + run.seconds, 0)
const cpuPerRequest = (runs: Run[]) => runs.reduce((total, run) => total + run.cpuMicros, 0) / runs.reduce((total, run) => total + run.requests, 0)
const generatorCpuPerRequest = (runs: ThroughputRun[]) =>
  runs.reduce((total, run) => total + run.generatorCpuMicros, 0) / runs.reduce((total, run) => total + run.requests, 0)

/** Loads `server` with the lean generator for the plan's duration, or `amount` requests. */
async function throughputRun (server: ServerProcess, fixture: InferFixture, plan: WorkersPlan, amount?: number): Promise<ThroughputRun> {
  const before = processTreeCpuMicros(server.pid)
  const load = await runPipelinedLoad({
    url: server.url,
    request: fixture.request,
    connections: plan.connections,
    pipelining: plan.pipelining,
    ...(amount === undefined ? { durationSeconds: plan.secondsPerRun } : { amount })
  })
  return {
    requests: load.completed,
    seconds: load.seconds,
    cpuMicros: processTreeCpuMicros(server.pid) - before,
    generatorCpuMicros: load.cpuMicros
  }
}

async function throughputSuite (plan: WorkersPlan): Promise<Omit<WorkersResult, 'tensorBytes' | 'sequence'>> {
  const servers: { one?: ServerProcess, two?: ServerProcess } = {}
  const fixtures: { one?: InferFixture, two?: InferFixture } = {}
  try {
    servers.one = await ServerProcess.start()
    servers.two = await ServerProcess.start({ workers: 2 })
    const kinds = ['one', 'two'] as const
    for (const kind of kinds) {
      const fixture = fixtures[kind] = await makeFixture((servers[kind] as ServerProcess).url, 'shm', TENSOR_BYTES)
      await fixture.verify()
      // Every worker's code compiled before the rounds count.
      await throughputRun(servers[kind] as ServerProcess, fixture, plan, plan.warmupRequests)
    }
    const runs: Record<'one' | 'two', ThroughputRun[]> = { one: [], two: [] }
    for (let round = 0; round < plan.rounds; round++) {
      for (const kind of round % 2 === 0 ? kinds : [...kinds].reverse()) {
        runs[kind].push(await throughputRun(servers[kind] as ServerProcess, fixtures[kind] as InferFixture, plan))
      }
      const [one, two] = [runs.one[round], runs.two[round]]
      progress(`workers round ${round + 1}/${plan.rounds}: one process ${rate([one]).toFixed(0)} req/s ` +
        `(server ${cpuPerRequest([one]).toFixed(1)} µs/req, generator ${generatorCpuPerRequest([one]).toFixed(1)} µs/req), ` +
        `two workers ${rate([two]).toFixed(0)} req/s (server ${cpuPerRequest([two]).toFixed(1)} µs/req, generator ${generatorCpuPerRequest([two]).toFixed(1)} µs/req)`)
    }
    const all = [...runs.one, ...runs.two]
    return {
      requestsPerSecond: { one: rate(runs.one), two: rate(runs.two) },
      throughputRatio: median(runs.two.map((run, round) => rate([run]) / rate([runs.one[round]]))),
      serverCpuMicrosPerRequest: { one: cpuPerRequest(runs.one), two: cpuPerRequest(runs.two) },
      generatorCpuMicrosPerRequest: generatorCpuPerRequest(all)
    }
  } finally {
    for (const fixture of Object.values(fixtures)) await fixture.dispose()
    for (const server of Object.values(servers)) await server.stop()
  }
}

const SEQUENCE_MODEL = 'simple_dyna_sequence'

/** A request of sequence `id` of Triton's `simple_dyna_sequence`. */
function sequenceRequest (id: number, start: boolean): LoadRequest {
  const body = JSON.stringify({
    parameters: { sequence_id: id, ...(start && { sequence_start: true }) },
    inputs: [{ name: 'INPUT', datatype: 'INT32', shape: [1, 1], data: [1] }]
  })
  return { method: 'POST', path: `/v2/models/${SEQUENCE_MODEL}/infer`, headers: { 'content-type': 'application/json' }, body, kind: 'sequence' }
}

async function startSequence (server: ServerProcess, id: number): Promise<void> {
  const { path, body, headers } = sequenceRequest(id, true)
  const response = await fetch(server.url + path, { method: 'POST', headers, body: body as string })
  if (!response.ok) throw new Error(`the START of sequence ${id}: ${response.status} ${await response.text()}`)
}

async function sequenceSuite (plan: WorkersPlan): Promise<WorkersResult['sequence']> {
  const store = tmpfsStorePath()
  const owner = await ServerProcess.start({ sharedRegistryPath: store })
  const other = await ServerProcess.start({ sharedRegistryPath: store })
  const cpu = async () => (await owner.stats()).cpuMicros + (await other.stats()).cpuMicros
  try {
    // Checked once: a request through the other process goes on the owner's sequence.
    await startSequence(owner, 1)
    const client = new KServeClient(other.url)
    const check = await client.infer(SEQUENCE_MODEL, { parameters: { sequence_id: 1 }, inputs: [{ name: 'INPUT', datatype: 'INT32', shape: [1, 1], data: [1] }] })
    if (check.outputs[0].data?.[0] !== 1) throw new Error(`a forwarded request answered ${JSON.stringify(check.outputs)}`)
    const runs: Record<'local' | 'forwarded', Run[]> = { local: [], forwarded: [] }
    const cases = ['local', 'forwarded'] as const
    for (const server of [owner, other]) await runLoad({ url: server.url, requests: [sequenceRequest(1, false)], connections: 1, amount: plan.warmupRequests })
    for (let round = 0; round < plan.rounds; round++) {
      for (const kind of round % 2 === 0 ? cases : [...cases].reverse()) {
        const id = 100 + round
        await startSequence(owner, id)
        const before = await cpu()
        const load = await runLoad({
          url: (kind === 'local' ? owner : other).url, requests: [sequenceRequest(id, false)], connections: 1, durationSeconds: plan.secondsPerRun
        })
        runs[kind].push({ requests: load.completed, seconds: load.seconds, cpuMicros: await cpu() - before })
      }
      progress(`forwarded sequence round ${round + 1}/${plan.rounds}: served by its owner ${cpuPerRequest([runs.local[round]]).toFixed(1)} µs/req, ` +
        `handed to it ${cpuPerRequest([runs.forwarded[round]]).toFixed(1)} µs/req`)
    }
    return {
      cpuMicrosPerRequest: { local: cpuPerRequest(runs.local), forwarded: cpuPerRequest(runs.forwarded) },
      requestsPerSecond: { local: rate(runs.local), forwarded: rate(runs.forwarded) },
      costRatio: median(runs.forwarded.map((run, round) => cpuPerRequest([run]) / cpuPerRequest([runs.local[round]])))
    }
  } finally {
    await owner.stop()
    await other.stop()
  }
}

export async function workersSuite (plan: WorkersPlan): Promise<WorkersResult> {
  progress(`add_sub_fp32 over shared memory at ${TENSOR_BYTES} bytes: two workers vs one process, ${plan.rounds} rounds`)
  const throughput = await throughputSuite(plan)
  progress(`a sequence's requests handed to the process that owns it vs served by it, ${plan.rounds} rounds`)
  const sequence = await sequenceSuite(plan)
  return { tensorBytes: TENSOR_BYTES, ...throughput, sequence }
}

if (require.main === module) {
  const quick = process.argv.includes('--quick')
  workersSuite(quick ? { rounds: 2, secondsPerRun: 1.5, connections: 16, pipelining: 4, warmupRequests: 3000 } : { rounds: 4, secondsPerRun: 3, connections: 16, pipelining: 4, warmupRequests: 10000 })
    .then((result) => { process.stdout.write(JSON.stringify(result, null, 2) + '\n') }, (error: unknown) => {
      process.stderr.write(`${(error as Error).stack ?? String(error)}\n`)
      process.exit(1)
    })
}
