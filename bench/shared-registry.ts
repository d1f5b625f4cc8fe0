/**
 * What `sharedRegistry` costs, against the in-process registry measured in the same run, with the
 * store on a tmpfs (a directory in /dev/shm, removed at exit), as the README recommends:
 *   - acquire + release of a 64 KiB region, in this process, while another lease on the region is
 *     live (the steady state of a busy service: one atomic load of the registry's revision per
 *     call), and alone (the first lease and the last release also add to this process's counter
 *     in the lease table: atomics, no write to the store);
 *   - shared-memory inference at 64 KiB: the server's CPU time per request, a server child with
 *     `sharedRegistry` against one without, in alternating runs.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import path from 'node:path'
import { Registry } from '../lib/registry/registry'
import { bytes, progress } from './format'
import { type InferFixture, makeFixture } from './infer-fixtures'
import { runLoad } from './load'
import { ServerProcess } from './server-process'
import { makeObject, removeObject } from './shm-objects'
import { median, nsPerCall } from './stats'

export const SHARED_TENSOR_BYTES = 64 * 1024
const MIN_ITERATIONS = 100

/** A fresh store path in a private directory on tmpfs; the directory goes when the bench exits. */
export function tmpfsStorePath (): string {
  const directory = mkdtempSync('/dev/shm/fastify-triton-shm-bench-')
  process.on('exit', () => rmSync(directory, { recursive: true, force: true }))
  return path.join(directory, 'registry.db')
}

export interface LeasePlan {
  /** Seconds one batch of one kind should take (the iteration count is calibrated to it). */
  batchSeconds: number
  batches: number
}

type LeaseCase = 'concurrent' | 'serial'
type RegistryKind = 'inProcess' | 'shared'

export interface LeaseResult {
  regionBytes: number
  /** ns per acquire + release, median of batches. */
  ns: Record<LeaseCase, Record<RegistryKind, number>>
}

export function sharedLeaseSuite (plan: LeasePlan, storePath: string): LeaseResult {
  const object = makeObject('shared_lease', SHARED_TENSOR_BYTES)
  const registries: Record<RegistryKind, Registry> = { inProcess: new Registry(), shared: new Registry({ sharedRegistry: { path: storePath } }) }
  try {
    const kinds = Object.keys(registries) as RegistryKind[]
    for (const kind of kinds) registries[kind].register('bench_lease', { key: object.key, byteSize: SHARED_TENSOR_BYTES })
    const cycle = (kind: RegistryKind) => () => registries[kind].acquire('bench_lease', 0, SHARED_TENSOR_BYTES).release()
    /** Runs `iterations` cycles; for the concurrent case, while one more lease stays live. */
    const batch = (leaseCase: LeaseCase, kind: RegistryKind, iterations: number): number => {
      const other = leaseCase === 'concurrent' ? registries[kind].acquire('bench_lease', 0, SHARED_TENSOR_BYTES) : undefined
      try {
        return nsPerCall(iterations, cycle(kind))
      } finally {
        other?.release()
      }
    }
    const cases: LeaseCase[] = ['concurrent', 'serial']
    const ns = { concurrent: { inProcess: 0, shared: 0 }, serial: { inProcess: 0, shared: 0 } }
    for (const leaseCase of cases) {
      // Warm-up, which also sizes the batches of each kind.
      const iterations = Object.fromEntries(kinds.map((kind) => {
        batch(leaseCase, kind, MIN_ITERATIONS)
        return [kind, Math.max(MIN_ITERATIONS, Math.round(plan.batchSeconds * 1e9 / batch(leaseCase, kind, MIN_ITERATIONS)))]
      })) as Record<RegistryKind, number>
      const samples: Record<RegistryKind, number[]> = { inProcess: [], shared: [] }
      for (let index = 0; index < plan.batches; index++) {
        // Alternate which kind runs first.
        for (const kind of index % 2 === 0 ? kinds : [...kinds].reverse()) samples[kind].push(batch(leaseCase, kind, iterations[kind]))
      }
      for (const kind of kinds) ns[leaseCase][kind] = median(samples[kind])
      progress(`acquire + release ${bytes(SHARED_TENSOR_BYTES)}, ${leaseCase}: in-process ${ns[leaseCase].inProcess.toFixed(0)} ns, ` +
        `shared ${ns[leaseCase].shared.toFixed(0)} ns`)
    }
    return { regionBytes: SHARED_TENSOR_BYTES, ns }
  } finally {
    for (const registry of Object.values(registries)) registry.close()
    removeObject(object)
  }
}

export interface SharedInferPlan {
  rounds: number
  secondsPerRun: number
  connections: number
  warmupRequests: number
}

export interface SharedInferFigures {
  requestsPerSecond: number
  /** Server CPU time (user + system) per request, microseconds. */
  serverCpuMicrosPerRequest: number
  requests: number
}

export interface SharedInferResult {
  tensorBytes: number
  inProcess: SharedInferFigures
  shared: SharedInferFigures
  /** shared CPU per request / in-process CPU per request. */
  cpuRatio: number
}

interface Totals { requests: number, seconds: number, cpuMicros: number }

export async function sharedInferSuite (plan: SharedInferPlan, storePath: string): Promise<SharedInferResult> {
  const servers: Partial<Record<RegistryKind, ServerProcess>> = {}
  try {
    servers.inProcess = await ServerProcess.start()
    servers.shared = await ServerProcess.start({ sharedRegistryPath: storePath })
    const runs: Array<{ kind: RegistryKind, server: ServerProcess, fixture: InferFixture, totals: Totals }> = []
    try {
      for (const kind of ['inProcess', 'shared'] as const) {
        const server = servers[kind] as ServerProcess
        const fixture = await makeFixture(server.url, 'shm', SHARED_TENSOR_BYTES)
        runs.push({ kind, server, fixture, totals: { requests: 0, seconds: 0, cpuMicros: 0 } })
        await fixture.verify()
        await runLoad({ url: server.url, requests: [fixture.request], connections: plan.connections, amount: plan.warmupRequests })
      }
      for (let round = 0; round < plan.rounds; round++) {
        for (const run of round % 2 === 0 ? runs : [...runs].reverse()) {
          const before = await run.server.stats()
          const load = await runLoad({ url: run.server.url, requests: [run.fixture.request], connections: plan.connections, durationSeconds: plan.secondsPerRun })
          const after = await run.server.stats()
          run.totals.requests += load.completed
          run.totals.seconds += load.seconds
          run.totals.cpuMicros += after.cpuMicros - before.cpuMicros
        }
        progress(`infer shm ${bytes(SHARED_TENSOR_BYTES)} round ${round + 1}/${plan.rounds}: ` +
          runs.map(({ kind, totals }) => `${kind} ${(totals.cpuMicros / totals.requests).toFixed(1)} µs CPU/req`).join(', '))
      }
    } finally {
      for (const run of runs) await run.fixture.dispose()
    }
    const figures = (kind: RegistryKind): SharedInferFigures => {
      const { requests, seconds, cpuMicros } = runs.find((run) => run.kind === kind)!.totals
      return { requestsPerSecond: requests / seconds, serverCpuMicrosPerRequest: cpuMicros / requests, requests }
    }
    const inProcess = figures('inProcess')
    const shared = figures('shared')
    return { tensorBytes: SHARED_TENSOR_BYTES, inProcess, shared, cpuRatio: shared.serverCpuMicrosPerRequest / inProcess.serverCpuMicrosPerRequest }
  } finally {
    for (const server of Object.values(servers)) await server.stop()
  }
}
