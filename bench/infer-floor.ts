/**
 * The infer floor: what the package's infer path costs the server per request, against a bare
 * Fastify route that parses the same body and answers the same bytes (`inferFloorCpuRatio`), and
 * what each step of the path adds. A ladder of routes (bench/server.ts's floorRoutes), each one
 * step more than the last, all answering the model table's answer: the bare route (Fastify's JSON
 * parser), the package's body parser, `readInferRequest` (checks, regions found and leased), the
 * model run and the answer built (the hand-written route), the model table's route (version,
 * statistics, admission), and that route with every request traced to a trace file (Triton's
 * trace settings at rate 1: `traceCostRatio`). `simple` in JavaScript (`simple_js`), INT32
 * [1, 16], inputs and outputs in shared memory. Rungs run in alternating rounds, the order turned
 * each round; the figure is the server's CPU time per request, which does not depend on the load
 * generator, and the ratios are the medians of the rounds' own: on a shared host the speed of the
 * whole machine drifts by tens of percent over a minute, and moves the rungs of one round together.
 *
 * Alone: `npx tsx bench/infer-floor.ts [--quick] [--cpu-prof]` (profiles to bench/results/profiles/).
 */
import { KServeClient } from '../lib/index'
import { runAlone } from './alone'
import { num, progress, ratio, table } from './format'
import { runLoad } from './load'
import type { ServerProcess } from './server-process'
import { FLOOR_MODEL, FLOOR_STEPS, floorPath, type FloorStep } from './server-protocol'
import { jsonRegion, SimpleShm } from './simple-shm'
import { median } from './stats'

export interface InferFloorPlan { rounds: number, secondsPerRun: number, connections: number }

export const FLOOR_STEP_LABELS: Record<FloorStep, string> = {
  bare: 'bare Fastify route: its JSON parser, the answer\'s bytes',
  body: '+ the package\'s infer body parser',
  read: '+ readInferRequest: checks, regions found and leased',
  hand: '+ the model run, outputs written, the answer built',
  table: '+ the model table: version, statistics, admission',
  traced: '+ every request traced to a trace file (rate 1)'
}

export interface InferFloorResult {
  requestBytes: number
  answerBytes: number
  connections: number
  rounds: number
  secondsPerRun: number
  /** Server CPU per request (µs) and requests per second, by rung. */
  steps: Record<FloorStep, { cpuMicrosPerRequest: number, requestsPerSecond: number }>
  /** The table's CPU per request / the bare route's: the median of the rounds' own ratios (a
   * host whose speed drifts moves the rungs of one round together, seconds apart). */
  cpuRatio: number
  /** The same ratio of all rounds' CPU and requests together. */
  totalCpuRatio: number
  /** The table's CPU per request with every request traced to a file / with tracing off (median
   * of the rounds' own). */
  traceCostRatio: number
}

export async function inferFloorSuite (server: ServerProcess, plan: InferFloorPlan): Promise<InferFloorResult> {
  const client = new KServeClient(server.url)
  const simple = new SimpleShm('floor')
  const body = JSON.stringify(simple.wire(jsonRegion))
  const headers = { 'content-type': 'application/json' }
  const post = async (path: string, sent = body) => {
    const response = await fetch(server.url + path, { method: 'POST', headers, body: sent })
    return `${response.status} ${await response.text()}`
  }
  // The traced rung: the table's route with Triton's trace settings at level TIMESTAMPS, rate 1,
  // into the file the server started with; every other rung runs with tracing off.
  const tracing = async (on: boolean) => {
    const settings = on ? { trace_level: ['TIMESTAMPS'], trace_rate: '1', trace_count: '-1' } : { trace_level: ['OFF'] }
    const answered = await post('/v2/trace/setting', JSON.stringify(settings))
    if (!answered.startsWith('200 ')) throw new Error(`the trace settings answer ${answered}`)
  }
  try {
    await simple.register(client)
    const answer = await post(floorPath('table'))
    if (!answer.startsWith('200 ') || !simple.answered()) throw new Error(`the table answers ${answer}`)
    await server.setBarePayload(answer.slice(4))
    for (const step of FLOOR_STEPS) {
      const answered = await post(floorPath(step))
      if (answered !== answer) throw new Error(`${step} answers ${answered}, not the table's ${answer}`)
    }
    const run = async (step: FloorStep, seconds: number) => {
      if (step === 'traced') await tracing(true)
      const before = await server.stats()
      const load = await runLoad({ url: server.url, requests: [{ method: 'POST', path: floorPath(step), headers, body }], connections: plan.connections, durationSeconds: seconds })
      const after = await server.stats()
      if (step === 'traced') await tracing(false)
      return { requests: load.completed, seconds: load.seconds, cpuMicros: after.cpuMicros - before.cpuMicros }
    }
    progress(`infer floor: warming up ${FLOOR_STEPS.length} routes (${plan.connections} connections)`)
    for (const step of [...FLOOR_STEPS, ...FLOOR_STEPS]) await run(step, Math.min(1, plan.secondsPerRun))
    const totals = new Map(FLOOR_STEPS.map((step) => [step, { requests: 0, seconds: 0, cpuMicros: 0 }]))
    const rounds: Array<Map<FloorStep, number>> = []
    for (let round = 0; round < plan.rounds; round++) {
      const perRequest = new Map<FloorStep, number>()
      rounds.push(perRequest)
      // Each round starts at another rung, so drift over a round does not always favour one.
      const order = FLOOR_STEPS.map((_, index) => FLOOR_STEPS[(index + round) % FLOOR_STEPS.length])
      for (const step of order) {
        const { requests, seconds, cpuMicros } = await run(step, plan.secondsPerRun)
        perRequest.set(step, cpuMicros / requests)
        const total = totals.get(step) as { requests: number, seconds: number, cpuMicros: number }
        total.requests += requests
        total.seconds += seconds
        total.cpuMicros += cpuMicros
      }
      progress(`infer floor round ${round + 1}/${plan.rounds}: ` +
        FLOOR_STEPS.map((step) => { const { cpuMicros, requests } = totals.get(step) as { cpuMicros: number, requests: number }; return `${step} ${(cpuMicros / requests).toFixed(1)}` }).join(', ') + ' µs/req')
    }
    const steps = Object.fromEntries([...totals].map(([step, { requests, seconds, cpuMicros }]) =>
      [step, { cpuMicrosPerRequest: cpuMicros / requests, requestsPerSecond: requests / seconds }])) as InferFloorResult['steps']
    return {
      requestBytes: Buffer.byteLength(body),
      answerBytes: Buffer.byteLength(answer) - 4,
      connections: plan.connections,
      rounds: plan.rounds,
      secondsPerRun: plan.secondsPerRun,
      steps,
      cpuRatio: median(rounds.map((round) => (round.get('table') as number) / (round.get('bare') as number))),
      totalCpuRatio: steps.table.cpuMicrosPerRequest / steps.bare.cpuMicrosPerRequest,
      traceCostRatio: median(rounds.map((round) => (round.get('traced') as number) / (round.get('table') as number)))
    }
  } finally {
    await client.unregisterSystemSharedMemory().catch(() => {})
    simple.dispose()
  }
}

/** The suite's table, as `npm run bench` prints it. */
export function inferFloorTable (result: InferFloorResult): string {
  const { steps } = result
  const bare = steps.bare.cpuMicrosPerRequest
  return table(`The infer floor: server CPU per request, ${FLOOR_MODEL} (INT32 [1, 16]) over shared memory, ${result.connections} connections`,
    ['route', 'CPU/req', 'step adds', 'vs bare', 'req/s'],
    FLOOR_STEPS.map((step, index) => [FLOOR_STEP_LABELS[step], `${num(steps[step].cpuMicrosPerRequest)} µs`,
      index === 0 ? '' : `${num(steps[step].cpuMicrosPerRequest - steps[FLOOR_STEPS[index - 1]].cpuMicrosPerRequest)} µs`,
      ratio(steps[step].cpuMicrosPerRequest / bare), num(steps[step].requestsPerSecond)]),
    [`inferFloorCpuRatio (server CPU per request, the table's route / the bare route), median of the rounds: ${ratio(result.cpuRatio)} (all rounds together: ${ratio(result.totalCpuRatio)})`,
      `traceCostRatio (the table's route, every request traced to a trace file / tracing off), median of the rounds: ${ratio(result.traceCostRatio)}`,
      `A ${result.requestBytes}-byte JSON request, a ${result.answerBytes}-byte answer; ${result.rounds} rounds of ${result.secondsPerRun} s per route, the order turned each round.`])
}

if (require.main === module) {
  runAlone(async (server, quick) => {
    const plan: InferFloorPlan = quick ? { rounds: 3, secondsPerRun: 1, connections: 4 } : { rounds: 11, secondsPerRun: 1.5, connections: 4 }
    const result = await inferFloorSuite(server, plan)
    process.stdout.write(inferFloorTable(result) + '\n')
    process.stdout.write(JSON.stringify({ inferFloorCpuRatio: result.cpuRatio, traceCostRatio: result.traceCostRatio }) + '\n')
  })
}
