/**
 * Route overhead: GET /v2/systemsharedmemory/status with 16 regions registered, against a bare
 * Fastify route of the same server answering the same bytes. Runs of the two alternate (ABBA),
 * so drift on a shared machine hits both alike. Requests are pipelined on each connection so the
 * load generator (one core, like the server) is not what limits the rate: the server's CPU busy
 * share is reported to show it. The server's CPU time per request is reported too: it does not
 * depend on the load generator at all.
 */
import { KServeClient } from '../lib/index'
import { progress } from './format'
import { runLoad } from './load'
import type { ServerProcess } from './server-process'
import { makeObject, removeObject } from './shm-objects'
import { median, type Percentiles, percentilesOf } from './stats'

export const STATUS_PATH = '/v2/systemsharedmemory/status'
export const BARE_PATH = '/bench/bare'
const REGION_COUNT = 16
const REGION_BYTES = 4096

export interface RouteFigures {
  path: string
  requestsPerSecond: number
  latencyMs: Percentiles
  /** Server CPU time per request, microseconds. */
  serverCpuMicrosPerRequest: number
  /** Server CPU time / wall time during the runs (1 = one core busy throughout). */
  serverCpuBusy: number
}

export interface RouteResult {
  regions: number
  responseBytes: number
  connections: number
  pipelining: number
  rounds: number
  secondsPerRun: number
  status: RouteFigures
  bare: RouteFigures
  /** status req/s / bare req/s, median over the rounds' pairs. */
  ratio: number
  /** bare CPU per request / status CPU per request (1 = no overhead). */
  cpuRatio: number
}

export interface RoutePlan {
  rounds: number
  secondsPerRun: number
  connections: number
  pipelining: number
}

interface Run { requests: number, seconds: number, cpuMicros: number, latencies: number[] }

async function loadRun (server: ServerProcess, path: string, plan: RoutePlan, seconds: number): Promise<Run> {
  const before = await server.stats()
  const load = await runLoad({
    url: server.url, requests: [{ method: 'GET', path }], connections: plan.connections, pipelining: plan.pipelining, durationSeconds: seconds
  })
  const after = await server.stats()
  return { requests: load.completed, seconds: load.seconds, cpuMicros: after.cpuMicros - before.cpuMicros, latencies: load.latencies.get(path) ?? [] }
}

function figures (path: string, runs: Run[]): RouteFigures {
  const requests = runs.reduce((sum, run) => sum + run.requests, 0)
  const seconds = runs.reduce((sum, run) => sum + run.seconds, 0)
  const cpuMicros = runs.reduce((sum, run) => sum + run.cpuMicros, 0)
  return {
    path,
    requestsPerSecond: requests / seconds,
    latencyMs: percentilesOf(runs.flatMap((run) => run.latencies)),
    serverCpuMicrosPerRequest: cpuMicros / requests,
    serverCpuBusy: cpuMicros / 1e6 / seconds
  }
}

export async function routeSuite (server: ServerProcess, plan: RoutePlan): Promise<RouteResult> {
  const client = new KServeClient(server.url)
  const objects = Array.from({ length: REGION_COUNT }, () => makeObject('route', REGION_BYTES))
  try {
    for (const [index, object] of objects.entries()) {
      await client.registerSystemSharedMemory(`bench_route_${String(index).padStart(2, '0')}`, object.key, REGION_BYTES)
    }
    const statusBody = await (await fetch(server.url + STATUS_PATH)).text()
    if ((JSON.parse(statusBody) as unknown[]).length !== REGION_COUNT) throw new Error(`status lists not ${REGION_COUNT} regions: ${statusBody}`)
    await server.setBarePayload(statusBody)
    const bareResponse = await fetch(server.url + BARE_PATH)
    if (await bareResponse.text() !== statusBody || bareResponse.headers.get('content-type') !== 'application/json') {
      throw new Error('the bare route does not answer the status bytes as application/json')
    }
    progress(`route: warming up both routes (${plan.connections} connections x ${plan.pipelining} pipelined)`)
    for (const path of [STATUS_PATH, BARE_PATH]) await loadRun(server, path, plan, Math.min(2, plan.secondsPerRun))
    const status: Run[] = []
    const bare: Run[] = []
    for (let round = 0; round < plan.rounds; round++) {
      const order = round % 2 === 0 ? [STATUS_PATH, BARE_PATH] : [BARE_PATH, STATUS_PATH]
      for (const path of order) {
        const run = await loadRun(server, path, plan, plan.secondsPerRun)
        ;(path === STATUS_PATH ? status : bare).push(run)
      }
      const ratio = (status[round].requests / status[round].seconds) / (bare[round].requests / bare[round].seconds)
      progress(`route round ${round + 1}/${plan.rounds}: status ${(status[round].requests / status[round].seconds).toFixed(0)} req/s, ` +
        `bare ${(bare[round].requests / bare[round].seconds).toFixed(0)} req/s (${ratio.toFixed(3)})`)
    }
    const ratios = status.map((run, round) => (run.requests / run.seconds) / (bare[round].requests / bare[round].seconds))
    const statusFigures = figures(STATUS_PATH, status)
    const bareFigures = figures(BARE_PATH, bare)
    return {
      regions: REGION_COUNT,
      responseBytes: Buffer.byteLength(statusBody),
      connections: plan.connections,
      pipelining: plan.pipelining,
      rounds: plan.rounds,
      secondsPerRun: plan.secondsPerRun,
      status: statusFigures,
      bare: bareFigures,
      ratio: median(ratios),
      cpuRatio: bareFigures.serverCpuMicrosPerRequest / statusFigures.serverCpuMicrosPerRequest
    }
  } finally {
    await client.unregisterSystemSharedMemory().catch(() => {})
    for (const object of objects) removeObject(object)
  }
}
