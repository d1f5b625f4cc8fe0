/**
 * What statistics of the whole service cost a request: two server children, each with a shared
 * registry (its store on tmpfs), one whose model table counts its statistics into the file every
 * process of the service maps (the default), one that counts them in its own memory
 * (`processStatistics`). Small tensors in shared memory, so the route's own cost is what differs;
 * runs alternate (ABBA); the figure is the server's CPU time per request, the median of the rounds'
 * ratios. Also, in this process, the nanoseconds one request's counting takes in either kind of
 * cells (a registry's shared ones, a table's own).
 */
import { Registry } from '../lib/registry/registry'
import { InferenceStatistics } from '../lib/models/statistics'
import { MemoryModelStore } from '../lib/store/model-store'
import { progress } from './format'
import { type InferFixture, makeFixture, MODEL } from './infer-fixtures'
import { runLoad } from './load'
import { ServerProcess } from './server-process'
import { tmpfsStorePath } from './shared-registry'
import { median, nsPerCall } from './stats'

const TENSOR_BYTES = 1024

export interface SharedStatisticsPlan {
  rounds: number
  secondsPerRun: number
  connections: number
  pipelining: number
  warmupRequests: number
}

type Kind = 'shared' | 'process'

export interface SharedStatisticsResult {
  tensorBytes: number
  rounds: number
  secondsPerRun: number
  connections: number
  pipelining: number
  /** Server CPU time per request, microseconds, over all rounds. */
  cpuMicrosPerRequest: Record<Kind, number>
  requestsPerSecond: Record<Kind, number>
  /** Shared / process CPU per request, median of the rounds' pairs (1 = no cost). */
  cpuRatio: number
  /** The same over all rounds' requests together. */
  totalCpuRatio: number
  /** The shared server's statistics counted every request it answered. */
  counted: boolean
  /** ns to count one successful request, median of batches, into each kind of cells. */
  countNs: Record<Kind, number>
}

const COUNT_ITERATIONS = 200_000
const COUNT_BATCHES = 9

/** One request's counting (`succeeded`, with its pending gauge) into shared cells and own ones. */
function countSuite (): Record<Kind, number> {
  const registry = new Registry({ sharedRegistry: { path: tmpfsStorePath() } })
  try {
    const statistics: Record<Kind, InferenceStatistics> = {
      shared: new InferenceStatistics(registry.modelStore().cells('bench', '1')),
      process: new InferenceStatistics(new MemoryModelStore().cells('bench', '1'))
    }
    const times = { start: 1, read: 2, runStart: 3, ran: 4, end: 5 }
    const count = (kind: Kind) => () => {
      statistics[kind].started()
      statistics[kind].running()
      statistics[kind].succeeded(times, 1)
    }
    const samples: Record<Kind, number[]> = { shared: [], process: [] }
    for (let batch = 0; batch < COUNT_BATCHES; batch++) {
      for (const kind of batch % 2 === 0 ? ['shared', 'process'] as const : ['process', 'shared'] as const) samples[kind].push(nsPerCall(COUNT_ITERATIONS, count(kind)))
    }
    return { shared: median(samples.shared), process: median(samples.process) }
  } finally {
    registry.close()
  }
}

interface Run { requests: number, seconds: number, cpuMicros: number }

const sum = (runs: Run[], field: keyof Run) => runs.reduce((total, run) => total + run[field], 0)
const cpuPerRequest = (runs: Run[]) => sum(runs, 'cpuMicros') / sum(runs, 'requests')

async function loadRun (server: ServerProcess, fixture: InferFixture, plan: SharedStatisticsPlan): Promise<Run> {
  const before = await server.stats()
  const load = await runLoad({
    url: server.url, requests: [fixture.request], connections: plan.connections, pipelining: plan.pipelining, durationSeconds: plan.secondsPerRun
  })
  const after = await server.stats()
  return { requests: load.completed, seconds: load.seconds, cpuMicros: after.cpuMicros - before.cpuMicros }
}

async function successes (server: ServerProcess, model: string): Promise<number> {
  const response = await fetch(`${server.url}/v2/models/${model}/stats`)
  const { model_stats: stats } = await response.json() as { model_stats: Array<{ inference_stats: { success: { count: number } } }> }
  return stats[0].inference_stats.success.count
}

export async function sharedStatisticsSuite (plan: SharedStatisticsPlan): Promise<SharedStatisticsResult> {
  const countNs = countSuite()
  progress(`counting one request: shared cells ${countNs.shared.toFixed(0)} ns, own cells ${countNs.process.toFixed(0)} ns`)
  const servers: Partial<Record<Kind, ServerProcess>> = {}
  const fixtures: Partial<Record<Kind, InferFixture>> = {}
  try {
    servers.shared = await ServerProcess.start({ sharedRegistryPath: tmpfsStorePath() })
    servers.process = await ServerProcess.start({ sharedRegistryPath: tmpfsStorePath(), processStatistics: true })
    const kinds = ['shared', 'process'] as const
    for (const kind of kinds) {
      const server = servers[kind] as ServerProcess
      const fixture = fixtures[kind] = await makeFixture(server.url, 'shm', TENSOR_BYTES)
      await fixture.verify()
      await runLoad({ url: server.url, requests: [fixture.request], connections: plan.connections, amount: plan.warmupRequests })
    }
    const runs: Record<Kind, Run[]> = { shared: [], process: [] }
    for (let round = 0; round < plan.rounds; round++) {
      for (const kind of round % 2 === 0 ? kinds : [...kinds].reverse()) {
        runs[kind].push(await loadRun(servers[kind] as ServerProcess, fixtures[kind] as InferFixture, plan))
      }
      progress(`shared statistics round ${round + 1}/${plan.rounds}: shared ${cpuPerRequest([runs.shared[round]]).toFixed(1)} µs/req, ` +
        `process ${cpuPerRequest([runs.process[round]]).toFixed(1)} µs/req`)
    }
    const counted = await successes(servers.shared as ServerProcess, MODEL) >= sum(runs.shared, 'requests')
    return {
      tensorBytes: TENSOR_BYTES,
      rounds: plan.rounds,
      secondsPerRun: plan.secondsPerRun,
      connections: plan.connections,
      pipelining: plan.pipelining,
      cpuMicrosPerRequest: { shared: cpuPerRequest(runs.shared), process: cpuPerRequest(runs.process) },
      requestsPerSecond: { shared: sum(runs.shared, 'requests') / sum(runs.shared, 'seconds'), process: sum(runs.process, 'requests') / sum(runs.process, 'seconds') },
      cpuRatio: median(runs.shared.map((run, round) => cpuPerRequest([run]) / cpuPerRequest([runs.process[round]]))),
      totalCpuRatio: cpuPerRequest(runs.shared) / cpuPerRequest(runs.process),
      counted,
      countNs
    }
  } finally {
    for (const fixture of Object.values(fixtures)) await fixture.dispose()
    for (const server of Object.values(servers)) await server.stop()
  }
}
