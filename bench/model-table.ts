/**
 * The model table's infer route against a hand-written one doing the same work: both read the
 * request with `readInferRequest`, run add_sub_fp32 and answer with `respond`; the table's also
 * resolves the model and version and times every phase into its statistics. Small tensors in
 * shared memory, so the route's own cost is what differs. Runs alternate (ABBA); the figure is
 * the server's CPU time per request, which does not depend on the load generator. The hand-written
 * route finds its model by a path parameter too, as a host's route for several models does.
 */
import { progress } from './format'
import { type InferFixture, makeFixture, MODEL } from './infer-fixtures'
import { runLoad } from './load'
import type { ServerProcess } from './server-process'
import { HAND_INFER_ROUTE } from './server-protocol'
import { median } from './stats'

/** The bench server's hand-written infer route (bench/server.ts), and its path for add_sub_fp32. */
const HAND_INFER_PATH = HAND_INFER_ROUTE.replace(':model', MODEL)
const TENSOR_BYTES = 1024

export interface ModelTablePlan {
  rounds: number
  secondsPerRun: number
  connections: number
  pipelining: number
}

export interface ModelTableResult {
  tensorBytes: number
  rounds: number
  secondsPerRun: number
  connections: number
  pipelining: number
  /** Server CPU time per request, microseconds, over all rounds. */
  tableCpuMicrosPerRequest: number
  handCpuMicrosPerRequest: number
  tableRequestsPerSecond: number
  handRequestsPerSecond: number
  /** Table CPU per request / hand-written CPU per request, median of the rounds' pairs (1 = no
   * overhead): a round disturbed by the machine's other work moves it least. */
  cpuRatio: number
  /** The same ratio over all rounds' requests together. */
  totalCpuRatio: number
}

interface Run { requests: number, seconds: number, cpuMicros: number }

async function loadRun (server: ServerProcess, fixture: InferFixture, path: string, plan: ModelTablePlan, seconds: number): Promise<Run> {
  const before = await server.stats()
  const load = await runLoad({
    url: server.url, requests: [{ ...fixture.request, path }], connections: plan.connections, pipelining: plan.pipelining, durationSeconds: seconds
  })
  const after = await server.stats()
  return { requests: load.completed, seconds: load.seconds, cpuMicros: after.cpuMicros - before.cpuMicros }
}

const sum = (runs: Run[], field: keyof Run) => runs.reduce((total, run) => total + run[field], 0)
const cpuPerRequest = (runs: Run[]) => sum(runs, 'cpuMicros') / sum(runs, 'requests')

async function answerOf (server: ServerProcess, fixture: InferFixture, path: string): Promise<string> {
  const { body, headers } = fixture.request
  const response = await fetch(server.url + path, { method: 'POST', headers, body: body as string })
  return `${response.status} ${await response.text()}`
}

export async function modelTableSuite (server: ServerProcess, plan: ModelTablePlan): Promise<ModelTableResult> {
  const fixture = await makeFixture(server.url, 'shm', TENSOR_BYTES)
  try {
    await fixture.verify()
    const tablePath = fixture.request.path
    const [table, hand] = [await answerOf(server, fixture, tablePath), await answerOf(server, fixture, HAND_INFER_PATH)]
    if (table !== hand || !table.startsWith('200 ')) throw new Error(`the routes answer differently: ${table} / ${hand}`)
    progress(`model table: warming up both routes (${plan.connections} connections x ${plan.pipelining} pipelined)`)
    // Twice each, alternating: the first runs of a route are still compiling it.
    for (const path of [tablePath, HAND_INFER_PATH, tablePath, HAND_INFER_PATH]) await loadRun(server, fixture, path, plan, plan.secondsPerRun)
    const tableRuns: Run[] = []
    const handRuns: Run[] = []
    for (let round = 0; round < plan.rounds; round++) {
      const order = round % 2 === 0 ? [tablePath, HAND_INFER_PATH] : [HAND_INFER_PATH, tablePath]
      for (const path of order) (path === tablePath ? tableRuns : handRuns).push(await loadRun(server, fixture, path, plan, plan.secondsPerRun))
      progress(`model table round ${round + 1}/${plan.rounds}: table ${cpuPerRequest([tableRuns[round]]).toFixed(1)} µs/req, ` +
        `hand-written ${cpuPerRequest([handRuns[round]]).toFixed(1)} µs/req`)
    }
    return {
      tensorBytes: TENSOR_BYTES,
      ...plan,
      tableCpuMicrosPerRequest: cpuPerRequest(tableRuns),
      handCpuMicrosPerRequest: cpuPerRequest(handRuns),
      tableRequestsPerSecond: sum(tableRuns, 'requests') / sum(tableRuns, 'seconds'),
      handRequestsPerSecond: sum(handRuns, 'requests') / sum(handRuns, 'seconds'),
      cpuRatio: median(tableRuns.map((run, round) => cpuPerRequest([run]) / cpuPerRequest([handRuns[round]]))),
      totalCpuRatio: cpuPerRequest(tableRuns) / cpuPerRequest(handRuns)
    }
  } finally {
    await fixture.dispose()
  }
}
