/**
 * One client against Triton's `simple` (INT32 [1, 16] in and out, tensors in shared memory), as
 * perf_analyzer runs it at concurrency 1: each request sent once the last one's response came.
 * Cases: HTTP (node:http, keep-alive, the request's bytes made once); ModelInfer from a lean
 * HTTP/2 client (node:http2, the request's gRPC message encoded once: what the server costs, as
 * perf_analyzer's C++ client measures it); ModelInfer and ModelStreamInfer from grpc-js clients
 * (GrpcKServeClient, and one stream); lean HTTP and lean ModelInfer again over the server's Unix
 * sockets. Figures, in requests per second: one grpc-js stream against grpc-js ModelInfer calls
 * (`grpcStreamVsUnaryThroughput`), lean ModelInfer against lean HTTP (`grpcVsHttpThroughput`), and
 * each lean client over a Unix socket against over TCP (`unixVsTcpThroughputHttp`, `...Grpc`); the
 * server's CPU per request beside them. The same lean clients against the transports' own floor
 * (bench/transport-floor.ts: bare node:http and node:http2 servers) say how near ModelInfer can
 * come to HTTP with Node's HTTP/2 on both ends (`transportFloorGrpcVsHttp`). Rounds alternate
 * between the cases, so a busy machine slows each alike; the service's outputs are checked once
 * per case.
 *
 * Alone: `npx tsx bench/grpc-stream.ts [--quick] [--cpu-prof]` (profiles to bench/results/profiles/).
 */
import { type ClientDuplexStream, credentials } from '@grpc/grpc-js'
import { GrpcKServeClient, inferenceService, MESSAGE_LIMIT_OPTIONS } from '../lib/grpc'
import type { ModelStreamInferResponse } from '../types/grpc'
import { num, progress, ratio, table } from './format'
import type { ServerProcess } from './server-process'
import { runAlone } from './alone'
import { alternatingRounds, type CaseResult } from './alternating-rounds'
import { httpClient, modelInferClient } from './lean-clients'
import { grpcRegion, jsonRegion, SimpleShm } from './simple-shm'

export interface GrpcStreamPlan { rounds: number, secondsPerRun: number }

type Case = 'http' | 'grpcUnary' | 'grpcJsUnary' | 'grpcStream' | 'httpUnix' | 'grpcUnaryUnix' | 'floorHttp' | 'floorGrpc' | 'floorOwnGrpc'
const CASES: Case[] = ['http', 'grpcUnary', 'grpcJsUnary', 'grpcStream', 'httpUnix', 'grpcUnaryUnix', 'floorHttp', 'floorGrpc', 'floorOwnGrpc']
/** The transports' own floor: not the service, nothing to check in their answers. */
const FLOOR_CASES: Case[] = ['floorHttp', 'floorGrpc', 'floorOwnGrpc']

export type GrpcStreamCaseResult = CaseResult

export interface GrpcStreamResult {
  cases: Record<Case, GrpcStreamCaseResult>
  /** req/s, one grpc-js stream / grpc-js ModelInfer calls, one at a time. */
  streamVsUnary: number
  /** req/s, lean ModelInfer / lean HTTP. */
  grpcVsHttp: number
  /** req/s, grpc-js ModelInfer / lean HTTP (the client's cost included). */
  grpcJsVsHttp: number
  /** req/s, over a Unix socket / over TCP: lean HTTP, and lean ModelInfer. */
  unixVsTcp: { http: number, grpc: number }
  /** req/s, the same lean clients against the transports' own floor: bare node:http2 / bare node:http. */
  floorGrpcVsHttp: number
  /** req/s, the same: a server of the package's own HTTP/2 / bare node:http. */
  floorOwnGrpcVsHttp: number
}

const MODEL = 'simple'

/** One ModelStreamInfer stream, one request in flight at a time. */
function streamSender (address: string, request: object): { send(): Promise<ModelStreamInferResponse>, close(): void } {
  const Client = inferenceService()
  const client = new Client(address, credentials.createInsecure(), MESSAGE_LIMIT_OPTIONS)
  const call = (client as unknown as { ModelStreamInfer(): ClientDuplexStream<object, ModelStreamInferResponse> }).ModelStreamInfer()
  let waiting: { resolve: (response: ModelStreamInferResponse) => void, reject: (error: Error) => void } | undefined
  call.on('data', (response: ModelStreamInferResponse) => {
    const pending = waiting
    waiting = undefined
    if (response.error_message !== '') pending?.reject(new Error(response.error_message))
    else pending?.resolve(response)
  })
  call.on('error', (error: Error) => waiting?.reject(error))
  return {
    send: () => new Promise((resolve, reject) => {
      waiting = { resolve, reject }
      call.write(request)
    }),
    close: () => {
      call.end()
      client.close()
    }
  }
}

export async function grpcStreamSuite (server: ServerProcess, plan: GrpcStreamPlan): Promise<GrpcStreamResult> {
  const simple = new SimpleShm('stream')
  const unary = new GrpcKServeClient(server.grpcAddress)
  const grpcRequest = { model_name: MODEL, ...simple.wire(grpcRegion) }
  const http = httpClient({ address: server.url.replace('http://', '') }, `/v2/models/${MODEL}/infer`, simple.wire(jsonRegion))
  const stream = streamSender(server.grpcAddress, grpcRequest)
  const raw = modelInferClient({ address: server.grpcAddress }, grpcRequest)
  const httpUnix = httpClient({ socketPath: server.httpSocket }, `/v2/models/${MODEL}/infer`, simple.wire(jsonRegion))
  const rawUnix = modelInferClient({ socketPath: server.grpcSocket }, grpcRequest)
  const floorHttp = httpClient({ address: server.floor.http }, `/v2/models/${MODEL}/infer`, simple.wire(jsonRegion))
  const floorGrpc = modelInferClient({ address: server.floor.grpc }, grpcRequest)
  const floorOwnGrpc = modelInferClient({ address: server.floor.ownGrpc }, grpcRequest)
  const send: Record<Case, () => Promise<unknown>> = {
    http: () => http.send(),
    grpcUnary: () => raw.send(),
    grpcJsUnary: () => unary.modelInfer(grpcRequest),
    grpcStream: () => stream.send(),
    httpUnix: () => httpUnix.send(),
    grpcUnaryUnix: () => rawUnix.send(),
    floorHttp: () => floorHttp.send(),
    floorGrpc: () => floorGrpc.send(),
    floorOwnGrpc: () => floorOwnGrpc.send()
  }
  try {
    await simple.register(unary)
    for (const name of CASES) {
      await send[name]()
      if (!FLOOR_CASES.includes(name) && !simple.answered()) throw new Error(`${name}: wrong outputs`)
    }
    const cases: Record<Case, GrpcStreamCaseResult> = await alternatingRounds(server, CASES, plan, async (name, deadline) => {
      let requests = 0
      while (process.hrtime.bigint() < deadline) {
        await send[name]()
        requests++
      }
      return requests
    })
    return {
      cases,
      streamVsUnary: cases.grpcStream.requestsPerSecond / cases.grpcJsUnary.requestsPerSecond,
      grpcVsHttp: cases.grpcUnary.requestsPerSecond / cases.http.requestsPerSecond,
      grpcJsVsHttp: cases.grpcJsUnary.requestsPerSecond / cases.http.requestsPerSecond,
      unixVsTcp: {
        http: cases.httpUnix.requestsPerSecond / cases.http.requestsPerSecond,
        grpc: cases.grpcUnaryUnix.requestsPerSecond / cases.grpcUnary.requestsPerSecond
      },
      floorGrpcVsHttp: cases.floorGrpc.requestsPerSecond / cases.floorHttp.requestsPerSecond,
      floorOwnGrpcVsHttp: cases.floorOwnGrpc.requestsPerSecond / cases.floorHttp.requestsPerSecond
    }
  } finally {
    await unary.unregisterSystemSharedMemory().catch(() => {})
    stream.close()
    raw.close()
    httpUnix.close()
    rawUnix.close()
    floorHttp.close()
    floorGrpc.close()
    floorOwnGrpc.close()
    unary.close()
    http.close()
    simple.dispose()
  }
}

export const GRPC_STREAM_LABELS: ReadonlyArray<[Case, string]> = [
  ['http', 'HTTP (node:http, keep-alive)'], ['grpcUnary', 'gRPC ModelInfer (node:http2, lean client)'],
  ['grpcJsUnary', 'gRPC ModelInfer (grpc-js, GrpcKServeClient)'], ['grpcStream', 'gRPC ModelStreamInfer (grpc-js, one stream)'],
  ['httpUnix', 'HTTP over a Unix socket (node:http)'], ['grpcUnaryUnix', 'gRPC ModelInfer over a Unix socket (node:http2, lean client)'],
  ['floorHttp', 'the floor: a bare node:http server (node:http)'], ['floorGrpc', 'the floor: a bare node:http2 gRPC server (node:http2, lean client)'],
  ['floorOwnGrpc', 'the floor: a gRPC server of the package\'s own HTTP/2 (lib/http2, lean client)']
]

/** The suite's table, as `npm run bench` prints it. */
export function grpcStreamTable (result: GrpcStreamResult, plan: GrpcStreamPlan): string {
  return table(`One client, one request at a time: ${MODEL} (INT32 [1, 16]), inputs and outputs in shared memory`,
    ['case', 'req/s', 'server CPU/req', 'requests'],
    GRPC_STREAM_LABELS.map(([kind, label]) => [label, num(result.cases[kind].requestsPerSecond), `${num(result.cases[kind].serverCpuMicrosPerRequest)} µs`,
      result.cases[kind].requests]),
    [`grpcStreamVsUnaryThroughput (req/s, grpc-js stream / grpc-js ModelInfer): ${ratio(result.streamVsUnary)}; ` +
      `grpcVsHttpThroughput (req/s, lean ModelInfer / HTTP): ${ratio(result.grpcVsHttp)} (grpc-js ModelInfer / HTTP: ${ratio(result.grpcJsVsHttp)})`,
      `unixVsTcpThroughput (req/s, a Unix socket / TCP): HTTP ${ratio(result.unixVsTcp.http)}, gRPC ModelInfer ${ratio(result.unixVsTcp.grpc)}`,
      `transportFloorGrpcVsHttp (req/s, the same clients against bare node:http2 / bare node:http servers): ${ratio(result.floorGrpcVsHttp)}: ` +
        'as near as unary gRPC can come to HTTP with Node on both ends; ' +
        `transportFloorOwnGrpcVsHttp (the same, a server of the package's own HTTP/2 / bare node:http): ${ratio(result.floorOwnGrpcVsHttp)}`,
      `${plan.rounds} alternating rounds of ${plan.secondsPerRun} s per case; each request sent when the last one's response came (perf_analyzer's concurrency 1).`])
}

if (require.main === module) {
  runAlone(async (server, quick) => {
    const plan: GrpcStreamPlan = quick ? { rounds: 2, secondsPerRun: 1 } : { rounds: 4, secondsPerRun: 3 }
    progress(`${MODEL} over HTTP, ModelInfer and ModelStreamInfer, ${plan.rounds} rounds of ${plan.secondsPerRun} s per case`)
    const result = await grpcStreamSuite(server, plan)
    process.stdout.write(grpcStreamTable(result, plan) + '\n')
    process.stdout.write(JSON.stringify({
      grpcStreamVsUnaryThroughput: result.streamVsUnary,
      grpcVsHttpThroughput: result.grpcVsHttp,
      grpcJsVsHttpThroughput: result.grpcJsVsHttp,
      unixVsTcpThroughputHttp: result.unixVsTcp.http,
      unixVsTcpThroughputGrpc: result.unixVsTcp.grpc,
      transportFloorGrpcVsHttp: result.floorGrpcVsHttp,
      transportFloorOwnGrpcVsHttp: result.floorOwnGrpcVsHttp
    }) + '\n')
  })
}
