/**
 * The inference suite: add_sub_fp32 (two FP32 inputs -> their sum and difference) over each
 * transport and tensor size, against one server child. At each size every transport's outputs are
 * checked once, each is warmed up, then the transports take turns in rounds (so drift on a shared
 * machine hits all alike), each round also timing the memcpy baseline while the server is idle.
 */
import { bytes, progress } from './format'
import { type InferFixture, makeFixture, type Transport } from './infer-fixtures'
import { runLoad } from './load'
import type { MemcpyBaseline } from './memcpy'
import type { ServerProcess } from './server-process'
import { type Percentiles, percentilesOf } from './stats'

/** V8's longest string (2^29 - 24 characters): a JSON body longer than this cannot be built or parsed. */
const V8_MAX_STRING = 2 ** 29 - 24
/** JSON characters per FP32 element of random values in [0, 1), with the separator (measured: 18 to 20). */
const JSON_CHARS_PER_ELEMENT = 20
const MEMCPY_COPIES_PER_ROUND = 5

export interface InferPoint {
  transport: Transport
  tensorBytes: number
  /** Set when the point could not be measured, with why. */
  skipped?: string
  requestsPerSecond?: number
  completed?: number
  seconds?: number
  latencyMs?: Percentiles
  /** Inputs read + outputs written, per second: 4 tensors per request. */
  tensorBytesPerSecond?: number
  /** Server's peak RSS after this size, bytes. */
  serverPeakRssBytes?: number
}

export interface InferPlan {
  sizes: number[]
  transports: Transport[]
  connections: number
  /** Seconds of measured load per transport and size, over all rounds (estimated from the warm-up). */
  targetSeconds: number
  rounds: number
  /** Most requests of one measured run. */
  maxRequests: number
}

export interface InferResult {
  points: InferPoint[]
  /** Seconds per copy of the memcpy baseline's buffer, sampled between the rounds. */
  memcpySeconds: number[]
}

function jsonTooLarge (tensorBytes: number): string | undefined {
  const characters = 2 * (tensorBytes / 4) * JSON_CHARS_PER_ELEMENT
  if (characters <= V8_MAX_STRING * 0.9) return undefined
  return `its JSON body (~${bytes(characters)}) exceeds V8's longest string (${bytes(V8_MAX_STRING)})`
}

interface Measured { fixture: InferFixture, secondsPerRequest: number, completed: number, seconds: number, latencies: number[] }

async function prepare (server: ServerProcess, fixture: InferFixture, plan: InferPlan): Promise<Measured> {
  const label = `infer ${fixture.transport} ${bytes(fixture.tensorBytes)}`
  progress(`${label}: checking every output element of one request`)
  const checkStarted = process.hrtime.bigint()
  await fixture.verify()
  const checkSeconds = Number(process.hrtime.bigint() - checkStarted) / 1e9
  const connections = plan.connections
  // Warm-up (JIT, buffers, page tables): about a tenth of the measured load, sized from the
  // checked request (a cold one, so an overestimate of its time); it then sizes the rounds.
  const warmupRequests = Math.max(connections, Math.min(plan.maxRequests, Math.round(plan.targetSeconds / 10 * connections / checkSeconds)))
  progress(`${label}: warming up (${warmupRequests} requests)`)
  const warmup = await runLoad({ url: server.url, requests: [fixture.request], connections, amount: warmupRequests, timeoutSeconds: 600 })
  return { fixture, secondsPerRequest: warmup.seconds * connections / warmup.completed, completed: 0, seconds: 0, latencies: [] }
}

async function round (server: ServerProcess, measured: Measured, plan: InferPlan): Promise<void> {
  const connections = plan.connections
  const amount = Math.max(connections, Math.min(plan.maxRequests,
    Math.round(plan.targetSeconds / plan.rounds * connections / measured.secondsPerRequest)))
  const load = await runLoad({ url: server.url, requests: [measured.fixture.request], connections, amount, timeoutSeconds: 600 })
  measured.completed += load.completed
  measured.seconds += load.seconds
  measured.latencies.push(...(load.latencies.get(measured.fixture.transport) ?? []))
}

async function measureSize (server: ServerProcess, memcpy: MemcpyBaseline, tensorBytes: number, plan: InferPlan,
  memcpySeconds: number[]): Promise<InferPoint[]> {
  const skipped: InferPoint[] = []
  const fixtures: InferFixture[] = []
  try {
    for (const transport of plan.transports) {
      const tooLarge = transport === 'json' ? jsonTooLarge(tensorBytes) : undefined
      if (tooLarge !== undefined) {
        progress(`infer ${transport} ${bytes(tensorBytes)}: not measured, ${tooLarge}`)
        skipped.push({ transport, tensorBytes, skipped: tooLarge })
        continue
      }
      progress(`infer ${transport} ${bytes(tensorBytes)}: building the request`)
      fixtures.push(await makeFixture(server.url, transport, tensorBytes))
    }
    const measured: Measured[] = []
    for (const fixture of fixtures) measured.push(await prepare(server, fixture, plan))
    for (let index = 0; index < plan.rounds; index++) {
      // Rotate the order, so no transport always runs first or last.
      const order = measured.map((_, position) => measured[(position + index) % measured.length])
      for (const entry of order) await round(server, entry, plan)
      memcpySeconds.push(...memcpy.measure(MEMCPY_COPIES_PER_ROUND))
      progress(`infer ${bytes(tensorBytes)} round ${index + 1}/${plan.rounds}: ` +
        measured.map((entry) => `${entry.fixture.transport} ${(entry.completed / entry.seconds).toFixed(1)} req/s`).join(', '))
    }
    const { peakRssBytes } = await server.stats()
    const points = measured.map(({ fixture, completed, seconds, latencies }): InferPoint => ({
      transport: fixture.transport,
      tensorBytes,
      requestsPerSecond: completed / seconds,
      completed,
      seconds,
      latencyMs: percentilesOf(latencies),
      tensorBytesPerSecond: 4 * tensorBytes * completed / seconds,
      serverPeakRssBytes: peakRssBytes
    }))
    return [...points, ...skipped]
  } finally {
    for (const fixture of fixtures) await fixture.dispose()
  }
}

export async function inferSuite (server: ServerProcess, memcpy: MemcpyBaseline, plan: InferPlan): Promise<InferResult> {
  const points: InferPoint[] = []
  const memcpySeconds: number[] = memcpy.measure(MEMCPY_COPIES_PER_ROUND)
  for (const tensorBytes of plan.sizes) points.push(...await measureSize(server, memcpy, tensorBytes, plan, memcpySeconds))
  return { points, memcpySeconds }
}
