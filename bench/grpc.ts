/**
 * KServe over gRPC: add_sub_fp32 through shared memory against `raw_input_contents` over the same
 * gRPC listener (`grpcShmSpeedupVsRaw`), and the server's CPU per shared memory inference over
 * gRPC against over HTTP (`grpcVsHttpCpuRatio`). Rounds alternate between the cases, so a busy
 * machine slows each alike; every case's outputs are checked once.
 */
import { GrpcKServeClient } from '../lib/grpc'
import { KServeClient } from '../lib/index'
import type { InferRequestWire } from '../types'
import { MODEL } from './infer-fixtures'
import type { ServerProcess } from './server-process'
import { alternatingRounds, type CaseResult } from './alternating-rounds'
import { makeObject, removeObject } from './shm-objects'

export interface GrpcPlan { tensorBytes: number, rounds: number, secondsPerRun: number, connections: number }

type Case = 'grpcShm' | 'grpcRaw' | 'httpShm'
const CASES: Case[] = ['grpcShm', 'grpcRaw', 'httpShm']

export type GrpcCaseResult = CaseResult

export interface GrpcResult {
  tensorBytes: number
  cases: Record<Case, GrpcCaseResult>
  shmSpeedupVsRaw: number
  cpuRatioVsHttp: number
}

function check (what: string, input0: Float32Array, input1: Float32Array, sum: Float32Array, difference: Float32Array): void {
  for (let index = 0; index < input0.length; index++) {
    if (sum[index] !== Math.fround(input0[index] + input1[index]) || difference[index] !== Math.fround(input0[index] - input1[index])) {
      throw new Error(`${what}: wrong output at element ${index}`)
    }
  }
}

const floatsOf = (bytes: Uint8Array) => new Float32Array(Uint8Array.from(bytes).buffer)

export async function grpcSuite (server: ServerProcess, plan: GrpcPlan): Promise<GrpcResult> {
  const { tensorBytes } = plan
  const elements = tensorBytes / 4
  const input = makeObject('grpc_in', 2 * tensorBytes)
  const output = makeObject('grpc_out', 2 * tensorBytes)
  const input0 = new Float32Array(input.bytes.buffer, 0, elements)
  const input1 = new Float32Array(input.bytes.buffer, tensorBytes, elements)
  for (let index = 0; index < elements; index++) {
    input0[index] = Math.random()
    input1[index] = Math.random()
  }
  const grpcClients = Array.from({ length: plan.connections }, () => new GrpcKServeClient(server.grpcAddress))
  const http = new KServeClient(server.url)
  const [grpc] = grpcClients
  const parameters = (region: string, offset: number) => ({ shared_memory_region: region, shared_memory_offset: offset, shared_memory_byte_size: tensorBytes })
  const shmRequest: InferRequestWire = {
    inputs: [0, 1].map((index) => ({ name: `INPUT${index}`, datatype: 'FP32', shape: [elements], parameters: parameters('bench_grpc_in', index * tensorBytes) })),
    outputs: [0, 1].map((index) => ({ name: `OUTPUT${index}`, parameters: parameters('bench_grpc_out', index * tensorBytes) }))
  }
  const rawInputs = [Buffer.from(input0.buffer, input0.byteOffset, tensorBytes), Buffer.from(input1.buffer, input1.byteOffset, tensorBytes)]
  const rawRequest = {
    model_name: MODEL,
    inputs: [0, 1].map((index) => ({ name: `INPUT${index}`, datatype: 'FP32', shape: [elements] })),
    raw_input_contents: rawInputs
  }
  const send: Record<Case, (client: GrpcKServeClient) => Promise<unknown>> = {
    grpcShm: (client) => client.infer(MODEL, shmRequest),
    grpcRaw: (client) => client.modelInfer(rawRequest),
    httpShm: () => http.infer(MODEL, shmRequest)
  }
  try {
    await grpc.registerSystemSharedMemory('bench_grpc_in', input.key, input.byteSize)
    await grpc.registerSystemSharedMemory('bench_grpc_out', output.key, output.byteSize)
    const sum = new Float32Array(output.bytes.buffer, 0, elements)
    const difference = new Float32Array(output.bytes.buffer, tensorBytes, elements)
    await send.grpcShm(grpc)
    check('gRPC, shared memory', input0, input1, sum, difference)
    output.bytes.fill(0)
    await send.httpShm(grpc)
    check('HTTP, shared memory', input0, input1, sum, difference)
    const raw = await grpc.modelInfer(rawRequest)
    check('gRPC, raw_input_contents', input0, input1, floatsOf(raw.raw_output_contents[0]), floatsOf(raw.raw_output_contents[1]))

    const cases: Record<Case, GrpcCaseResult> = await alternatingRounds(server, CASES, plan, async (name, deadline) => {
      let requests = 0
      await Promise.all(grpcClients.map(async (client) => {
        while (process.hrtime.bigint() < deadline) {
          await send[name](client)
          requests++
        }
      }))
      return requests
    })
    return {
      tensorBytes,
      cases,
      shmSpeedupVsRaw: cases.grpcShm.requestsPerSecond / cases.grpcRaw.requestsPerSecond,
      cpuRatioVsHttp: cases.grpcShm.serverCpuMicrosPerRequest / cases.httpShm.serverCpuMicrosPerRequest
    }
  } finally {
    await grpc.unregisterSystemSharedMemory().catch(() => {})
    for (const client of grpcClients) client.close()
    removeObject(input)
    removeObject(output)
  }
}
