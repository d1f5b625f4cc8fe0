/**
 * What a request leaves alive past a young-generation collection (a scavenge): the bytes in the
 * server's new space after one, per request, after one client's requests one at a time. A small
 * request's objects are all dead by the next scavenge; what outlives it is copied, promoted to the
 * old generation at the next, and freed only by a full collection, and a scavenge's pause grows
 * with it. `simple` over shared memory from the lean clients of bench/grpc-stream.ts, over HTTP,
 * unary ModelInfer and the package's own HTTP/2 floor server; HTTP is the baseline
 * (`scavengeSurvivalGrpcVsHttp`). The server runs with `--expose-gc` and a 16 MiB semi-space, so
 * that no scavenge of its own comes among a case's requests.
 *
 * Alone: `npx tsx bench/scavenge-survival.ts [--quick]`.
 */
import { GrpcKServeClient } from '../lib/grpc'
import { num, progress, ratio, table } from './format'
import { runAlone } from './alone'
import { httpClient, type LeanClient, modelInferClient } from './lean-clients'
import type { ServerProcess } from './server-process'
import { grpcRegion, jsonRegion, SimpleShm } from './simple-shm'

export interface ScavengeSurvivalPlan { rounds: number, requests: number }

type Case = 'http' | 'grpcUnary' | 'floorOwnGrpc'
const CASES: ReadonlyArray<[Case, string]> = [
  ['http', 'HTTP (node:http, keep-alive)'],
  ['grpcUnary', 'gRPC ModelInfer (node:http2, lean client)'],
  ['floorOwnGrpc', 'the floor: a gRPC server of the package\'s own HTTP/2 (lib/http2, lean client)']
]

/** The flags the suite's server needs. */
export const SCAVENGE_SURVIVAL_SERVER_FLAGS = ['--expose-gc', '--min-semi-space-size=16', '--max-semi-space-size=16']

export interface ScavengeSurvivalResult {
  /** Bytes surviving a scavenge per request, by case (the mean of the rounds). */
  bytesPerRequest: Record<Case, number>
  /** What a scavenge after no request leaves: subtracted from each case's. */
  idleBytes: number
  /** Bytes per request, unary ModelInfer / HTTP. */
  grpcVsHttp: number
}

const MODEL = 'simple'

export async function scavengeSurvivalSuite (server: ServerProcess, plan: ScavengeSurvivalPlan): Promise<ScavengeSurvivalResult> {
  const simple = new SimpleShm('scavenge')
  const admin = new GrpcKServeClient(server.grpcAddress)
  const grpcRequest = { model_name: MODEL, ...simple.wire(grpcRegion) }
  const clients: Record<Case, LeanClient> = {
    http: httpClient({ address: server.url.replace('http://', '') }, `/v2/models/${MODEL}/infer`, simple.wire(jsonRegion)),
    grpcUnary: modelInferClient({ address: server.grpcAddress }, grpcRequest),
    floorOwnGrpc: modelInferClient({ address: server.floor.ownGrpc }, grpcRequest)
  }
  // Two scavenges: what survived before is promoted, and the new space holds nothing of it.
  const cleared = async () => { await server.scavenge(); await server.scavenge() }
  try {
    await simple.register(admin)
    for (const [name] of CASES) {
      for (let request = 0; request < plan.requests; request++) await clients[name].send()
      if (name !== 'floorOwnGrpc' && !simple.answered()) throw new Error(`${name}: wrong outputs`)
    }
    await cleared()
    const idleBytes = await server.scavenge()
    const totals = new Map<Case, number>(CASES.map(([name]) => [name, 0]))
    for (let round = 0; round < plan.rounds; round++) {
      for (const [name] of round % 2 === 0 ? CASES : [...CASES].reverse()) {
        await cleared()
        for (let request = 0; request < plan.requests; request++) await clients[name].send()
        const survived = await server.scavenge()
        totals.set(name, (totals.get(name) as number) + Math.max(0, survived - idleBytes) / plan.requests)
      }
    }
    const bytesPerRequest = Object.fromEntries([...totals].map(([name, total]) => [name, total / plan.rounds])) as Record<Case, number>
    return { bytesPerRequest, idleBytes, grpcVsHttp: bytesPerRequest.grpcUnary / bytesPerRequest.http }
  } finally {
    await admin.unregisterSystemSharedMemory().catch(() => {})
    for (const client of Object.values(clients)) client.close()
    admin.close()
    simple.dispose()
  }
}

/** The suite's table. */
export function scavengeSurvivalTable (result: ScavengeSurvivalResult, plan: ScavengeSurvivalPlan): string {
  return table(`What a request leaves alive past a scavenge: ${MODEL} over shared memory, one client, one request at a time`,
    ['case', 'bytes per request'],
    CASES.map(([name, label]) => [label, num(result.bytesPerRequest[name])]),
    [`scavengeSurvivalGrpcVsHttp (bytes surviving a scavenge per request, ModelInfer / HTTP): ${ratio(result.grpcVsHttp)}`,
      `${plan.rounds} alternating rounds of ${plan.requests} requests per case, each followed by one scavenge; ` +
        `${num(result.idleBytes)} bytes surviving one after no request subtracted.`])
}

if (require.main === module) {
  runAlone(async (server, quick) => {
    const plan: ScavengeSurvivalPlan = quick ? { rounds: 2, requests: 300 } : { rounds: 6, requests: 1000 }
    progress(`${MODEL} over HTTP and ModelInfer, ${plan.rounds} rounds of ${plan.requests} requests per case, a scavenge after each`)
    const result = await scavengeSurvivalSuite(server, plan)
    process.stdout.write(scavengeSurvivalTable(result, plan) + '\n')
    process.stdout.write(JSON.stringify({
      scavengeSurvivalHttp: result.bytesPerRequest.http,
      scavengeSurvivalGrpc: result.bytesPerRequest.grpcUnary,
      scavengeSurvivalOwnHttp2Floor: result.bytesPerRequest.floorOwnGrpc,
      scavengeSurvivalGrpcVsHttp: result.grpcVsHttp
    }) + '\n')
  }, { nodeFlags: SCAVENGE_SURVIVAL_SERVER_FLAGS })
}
