/**
 * The ONNX suite: models run by ONNX Runtime through fastify-triton-shm/onnxruntime, one input and
 * one output each, through shared memory against the binary tensor data extension.
 *   identity_fp32    ORT copies the input into the output: the transport and nothing else
 *   tiny_classifier  an image network at its own input size (FP32 [1, 3, 224, 224])
 * Also how far the server's private memory (RssAnon) rises under a small and a large load of each
 * transport: with shared memory ORT reads and writes the client's pages, so it should hardly rise;
 * how ORT's copy through shared memory compares with memcpy at each size; how fast the status route
 * answers while large inferences run back to back (ORT runs off the event loop); and how much two
 * clients get over one on the classifier (runs on threads of their own).
 */
import { readFileSync } from 'node:fs'
import { randomBytes } from 'node:crypto'
import { KServeClient, type SharedMemoryObject } from '../lib/index'
import type { InferRequestWire } from '../types'
import { classify, testImage } from '../example/onnx/classifier-reference'
import { bytes, progress } from './format'
import { type LoadRequest, runLoad } from './load'
import { type Percentiles, percentilesOf } from './stats'
import type { ServerProcess } from './server-process'
import { makeObject, removeObject } from './shm-objects'

export interface OnnxPlan {
  /** identity_fp32 tensor for the shm / binary throughput ratio. */
  identityBytes: number
  /** identity_fp32 tensor for the bandwidth figure and the large RssAnon sample. */
  largeBytes: number
  /** identity_fp32 tensor of the small RssAnon sample. */
  smallBytes: number
  secondsPerRun: number
  rounds: number
  connections: number
  /** identity_fp32 tensors of the bandwidth figure, each through shm with 1 connection. */
  bandwidthSizes: number[]
  /** How long the status route is timed, idle and then busy. */
  statusSeconds: number
}

type OnnxTransport = 'shm' | 'binary'

interface OnnxFixture {
  transport: OnnxTransport
  request: LoadRequest
  /** Sends once and checks the output, byte for byte. */
  verify(): Promise<void>
  dispose(): Promise<void>
}

interface ModelCase { model: string, input: string, output: string, shape: number[], inputBytes: number, outputBytes: number }

const identityCase = (tensorBytes: number): ModelCase =>
  ({ model: 'identity_fp32', input: 'INPUT0', output: 'OUTPUT0', shape: [1, tensorBytes / 4], inputBytes: tensorBytes, outputBytes: tensorBytes })

const CLASSIFIER: ModelCase = { model: 'tiny_classifier', input: 'image', output: 'probabilities', shape: [1, 3, 224, 224], inputBytes: 3 * 224 * 224 * 4, outputBytes: 40 }

async function post (url: string, request: LoadRequest): Promise<Buffer> {
  const response = await fetch(url + request.path, { method: 'POST', headers: request.headers, body: typeof request.body === 'string' ? request.body : new Uint8Array(request.body as Buffer) })
  if (!response.ok) throw new Error(`POST ${request.path}: ${response.status} ${await response.text()}`)
  return Buffer.from(await response.arrayBuffer())
}

function randomFloats (byteSize: number): Buffer {
  const floats = Float32Array.from({ length: byteSize / 4 }, () => Math.random())
  return Buffer.from(floats.buffer)
}

/** Whether an output is right: the input itself for identity_fp32, the reference's probabilities for the classifier. */
type Check = (output: Buffer) => boolean

async function sharedMemoryFixture (url: string, model: ModelCase, input: Buffer, check: Check): Promise<OnnxFixture> {
  const client = new KServeClient(url)
  const tag = randomBytes(4).toString('hex')
  const region = `bench_onnx_${tag}`
  const object: SharedMemoryObject = makeObject('onnx', model.inputBytes + model.outputBytes)
  object.bytes.set(input)
  object.bytes.fill(0xff, model.inputBytes) // a client reusing its output region has touched it
  await client.registerSystemSharedMemory(region, object.key, object.byteSize)
  const at = (offset: number, byteSize: number) => ({ shared_memory_region: region, shared_memory_offset: offset, shared_memory_byte_size: byteSize })
  const wire: InferRequestWire = {
    inputs: [{ name: model.input, datatype: 'FP32', shape: model.shape, parameters: at(0, model.inputBytes) }],
    outputs: [{ name: model.output, parameters: at(model.inputBytes, model.outputBytes) }]
  }
  const request: LoadRequest = { method: 'POST', path: `/v2/models/${model.model}/infer`, headers: { 'content-type': 'application/json' }, body: JSON.stringify(wire), kind: 'shm' }
  return {
    transport: 'shm',
    request,
    async verify () {
      object.bytes.fill(0xff, model.inputBytes)
      await post(url, request)
      const output = Buffer.from(object.bytes.buffer, object.bytes.byteOffset + model.inputBytes, model.outputBytes)
      if (!check(output)) throw new Error(`${model.model} shm: wrong output`)
    },
    async dispose () {
      await client.unregisterSystemSharedMemory(region).catch(() => {})
      removeObject(object)
    }
  }
}

function binaryFixture (url: string, model: ModelCase, input: Buffer, check: Check): OnnxFixture {
  const wire: InferRequestWire = {
    inputs: [{ name: model.input, datatype: 'FP32', shape: model.shape, parameters: { binary_data_size: model.inputBytes } }],
    outputs: [{ name: model.output, parameters: { binary_data: true } }]
  }
  // Padded so the tensor starts 8-byte aligned in the body: the server then views it in place.
  const json = JSON.stringify(wire)
  const header = Buffer.from(json.padEnd(Math.ceil(json.length / 8) * 8, ' '))
  const request: LoadRequest = {
    method: 'POST',
    path: `/v2/models/${model.model}/infer`,
    headers: { 'content-type': 'application/octet-stream', 'inference-header-content-length': String(header.length) },
    body: Buffer.concat([header, input]),
    kind: 'binary'
  }
  return {
    transport: 'binary',
    request,
    async verify () {
      const body = await post(url, request)
      if (!check(body.subarray(body.length - model.outputBytes))) throw new Error(`${model.model} binary: wrong output`)
    },
    async dispose () {}
  }
}

async function fixturesFor (url: string, model: ModelCase, input: Buffer, check: Check = (output) => output.equals(input)): Promise<OnnxFixture[]> {
  const fixtures = [await sharedMemoryFixture(url, model, input, check), binaryFixture(url, model, input, check)]
  for (const fixture of fixtures) await fixture.verify()
  return fixtures
}

/** req/s of each fixture, taking turns over the rounds. */
async function throughput (server: ServerProcess, fixtures: OnnxFixture[], plan: OnnxPlan, label: string): Promise<Record<OnnxTransport, number>> {
  const totals = new Map<OnnxFixture, { completed: number, seconds: number }>(fixtures.map((fixture) => [fixture, { completed: 0, seconds: 0 }]))
  for (const fixture of fixtures) await runLoad({ url: server.url, requests: [fixture.request], connections: plan.connections, durationSeconds: plan.secondsPerRun / 2 })
  for (let round = 0; round < plan.rounds; round++) {
    for (const fixture of round % 2 === 0 ? fixtures : [...fixtures].reverse()) {
      const load = await runLoad({ url: server.url, requests: [fixture.request], connections: plan.connections, durationSeconds: plan.secondsPerRun, timeoutSeconds: 600 })
      const total = totals.get(fixture) as { completed: number, seconds: number }
      total.completed += load.completed
      total.seconds += load.seconds
    }
  }
  const rates = Object.fromEntries(fixtures.map((fixture) => {
    const { completed, seconds } = totals.get(fixture) as { completed: number, seconds: number }
    return [fixture.transport, completed / seconds]
  })) as Record<OnnxTransport, number>
  progress(`${label}: shm ${rates.shm.toFixed(1)} req/s, binary ${rates.binary.toFixed(1)} req/s`)
  return rates
}

/** The server's private resident memory: what it allocated, not the shared pages it maps. */
function rssAnonBytes (pid: number): number {
  const line = /^RssAnon:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
  return Number(line?.[1]) * 1024
}

/** How far RssAnon rose above where it stood before, at its highest while the server was loaded
 * with identity_fp32 at `tensorBytes` through `transport` (sampled every 10 ms). */
async function rssAnonRise (server: ServerProcess, transport: OnnxTransport, tensorBytes: number, plan: OnnxPlan): Promise<number> {
  const input = randomFloats(tensorBytes)
  const fixtures = await fixturesFor(server.url, identityCase(tensorBytes), input)
  const fixture = fixtures.find((each) => each.transport === transport) as OnnxFixture
  const before = rssAnonBytes(server.pid)
  let peak = before
  const sampler = setInterval(() => { peak = Math.max(peak, rssAnonBytes(server.pid)) }, 10)
  try {
    await runLoad({ url: server.url, requests: [fixture.request], connections: plan.connections, durationSeconds: plan.secondsPerRun, timeoutSeconds: 600 })
    return peak - before
  } finally {
    clearInterval(sampler)
    for (const each of fixtures) await each.dispose()
  }
}

export interface OnnxResult {
  identity: { tensorBytes: number, shm: number, binary: number }
  classifier: { inputBytes: number, shm: number, binary: number }
  /** identity_fp32 through shm, 1 connection, at each of `bandwidthSizes`: bytes ORT copied per second. */
  bandwidthBySize: Array<{ tensorBytes: number, bytesPerSecond: number }>
  /** Latency (ms) of GET /v2/systemsharedmemory/status alone, and while identity_fp32 runs back to back. */
  status: { tensorBytes: number, idle: Percentiles, busy: Percentiles, inferences: number }
  /** tiny_classifier through shm: req/s with one client and with two. */
  concurrent: { one: number, two: number }
  /** RssAnon growth (bytes) per request over a run of identity_fp32 through shm at `largeBytes`. */
  anonPerRequest: { tensorBytes: number, bytes: number, requests: number }
  /** How far RssAnon (bytes) rose during a small and a large run, per transport. */
  rssAnon: Record<OnnxTransport, { small: number, large: number }>
  smallBytes: number
  largeBytes: number
}

/** The classifier's output is right when every probability is within 1e-5 of the JavaScript reference. */
function classifierCheck (): Check {
  const expected = classify(testImage())
  return (output) => {
    const probabilities = new Float32Array(output.buffer.slice(output.byteOffset, output.byteOffset + output.length))
    return probabilities.length === expected.length && probabilities.every((value, index) => Math.abs(value - expected[index]) <= 1e-5)
  }
}

export async function onnxSuite (server: ServerProcess, plan: OnnxPlan): Promise<OnnxResult> {
  progress(`onnx: identity_fp32 ${bytes(plan.identityBytes)}, shm vs binary`)
  let fixtures = await fixturesFor(server.url, identityCase(plan.identityBytes), randomFloats(plan.identityBytes))
  const identity = await throughput(server, fixtures, plan, `onnx identity_fp32 ${bytes(plan.identityBytes)}`).finally(async () => {
    for (const fixture of fixtures) await fixture.dispose()
  })
  progress('onnx: tiny_classifier, shm vs binary')
  fixtures = await fixturesFor(server.url, CLASSIFIER, Buffer.from(testImage().buffer), classifierCheck())
  const classifier = await throughput(server, fixtures, plan, 'onnx tiny_classifier').finally(async () => {
    for (const fixture of fixtures) await fixture.dispose()
  })
  const bandwidthBySize: Array<{ tensorBytes: number, bytesPerSecond: number }> = []
  for (const tensorBytes of plan.bandwidthSizes) {
    progress(`onnx: identity_fp32 ${bytes(tensorBytes)} through shm, bytes copied by ORT per second`)
    bandwidthBySize.push({ tensorBytes, bytesPerSecond: await bandwidthAt(server, tensorBytes, plan.secondsPerRun * plan.rounds) })
  }
  progress(`onnx: the status route idle, then while identity_fp32 ${bytes(plan.largeBytes)} inferences run back to back`)
  const status = await statusWhileInferring(server, plan.largeBytes, plan.statusSeconds)
  progress('onnx: tiny_classifier through shm, two clients against one')
  const concurrent = await concurrentSpeedup(server, plan)
  progress(`onnx: RssAnon per request, identity_fp32 ${bytes(plan.largeBytes)} through shm`)
  const anonPerRequest = await rssAnonPerRequest(server, plan.largeBytes, plan)
  progress(`onnx: how far the server's RssAnon rises under identity_fp32 at ${bytes(plan.smallBytes)} and ${bytes(plan.largeBytes)}`)
  const rssAnon = {} as Record<OnnxTransport, { small: number, large: number }>
  for (const transport of ['shm', 'binary'] as const) {
    rssAnon[transport] = {
      small: await rssAnonRise(server, transport, plan.smallBytes, plan),
      large: await rssAnonRise(server, transport, plan.largeBytes, plan)
    }
  }
  return {
    identity: { tensorBytes: plan.identityBytes, ...identity },
    classifier: { inputBytes: CLASSIFIER.inputBytes, ...classifier },
    bandwidthBySize,
    status,
    concurrent,
    anonPerRequest,
    rssAnon,
    smallBytes: plan.smallBytes,
    largeBytes: plan.largeBytes
  }
}

/** Bytes ORT copied per second, identity_fp32 through shm, one connection. */
async function bandwidthAt (server: ServerProcess, tensorBytes: number, seconds: number): Promise<number> {
  const input = randomFloats(tensorBytes)
  const fixture = await sharedMemoryFixture(server.url, identityCase(tensorBytes), input, (output) => output.equals(input))
  try {
    await fixture.verify()
    const load = await runLoad({ url: server.url, requests: [fixture.request], connections: 1, durationSeconds: seconds, timeoutSeconds: 600 })
    return load.completed * tensorBytes / load.seconds
  } finally {
    await fixture.dispose()
  }
}

/** Latencies (ms) of status requests sent one after another for `seconds`. */
async function statusLatencies (url: string, seconds: number): Promise<number[]> {
  const latencies: number[] = []
  const end = performance.now() + seconds * 1000
  while (performance.now() < end) {
    const start = performance.now()
    const response = await fetch(`${url}/v2/systemsharedmemory/status`)
    await response.arrayBuffer()
    latencies.push(performance.now() - start)
  }
  return latencies
}

async function statusWhileInferring (server: ServerProcess, tensorBytes: number, seconds: number): Promise<OnnxResult['status']> {
  const idle = percentilesOf(await statusLatencies(server.url, seconds))
  const input = randomFloats(tensorBytes)
  const fixture = await sharedMemoryFixture(server.url, identityCase(tensorBytes), input, (output) => output.equals(input))
  try {
    await fixture.verify()
    const [busy, load] = await Promise.all([
      statusLatencies(server.url, seconds),
      runLoad({ url: server.url, requests: [fixture.request], connections: 1, durationSeconds: seconds, timeoutSeconds: 600 })
    ])
    progress(`onnx status: idle p50 ${idle.p50.toFixed(2)} ms; while inferring p50 ${percentilesOf(busy).p50.toFixed(2)} ms, p99 ${percentilesOf(busy).p99.toFixed(2)} ms (${load.completed} inferences)`)
    return { tensorBytes, idle, busy: percentilesOf(busy), inferences: load.completed }
  } finally {
    await fixture.dispose()
  }
}

/** tiny_classifier through shm: req/s of one client and of two, alternating over the rounds. */
async function concurrentSpeedup (server: ServerProcess, plan: OnnxPlan): Promise<OnnxResult['concurrent']> {
  const fixture = await sharedMemoryFixture(server.url, CLASSIFIER, Buffer.from(testImage().buffer), classifierCheck())
  const totals = { 1: { completed: 0, seconds: 0 }, 2: { completed: 0, seconds: 0 } }
  try {
    await fixture.verify()
    await runLoad({ url: server.url, requests: [fixture.request], connections: 2, durationSeconds: plan.secondsPerRun / 2 })
    for (let round = 0; round < plan.rounds; round++) {
      for (const connections of round % 2 === 0 ? [1, 2] as const : [2, 1] as const) {
        const load = await runLoad({ url: server.url, requests: [fixture.request], connections, durationSeconds: plan.secondsPerRun, timeoutSeconds: 600 })
        totals[connections].completed += load.completed
        totals[connections].seconds += load.seconds
      }
    }
  } finally {
    await fixture.dispose()
  }
  const rate = (connections: 1 | 2) => totals[connections].completed / totals[connections].seconds
  progress(`onnx tiny_classifier: one client ${rate(1).toFixed(1)} req/s, two ${rate(2).toFixed(1)} req/s`)
  return { one: rate(1), two: rate(2) }
}

/** RssAnon after a run minus before it, per request, once the server has warmed up at that size. */
async function rssAnonPerRequest (server: ServerProcess, tensorBytes: number, plan: OnnxPlan): Promise<OnnxResult['anonPerRequest']> {
  const input = randomFloats(tensorBytes)
  const fixture = await sharedMemoryFixture(server.url, identityCase(tensorBytes), input, (output) => output.equals(input))
  try {
    await fixture.verify()
    const load = (durationSeconds: number) => runLoad({ url: server.url, requests: [fixture.request], connections: plan.connections, durationSeconds, timeoutSeconds: 600 })
    await load(plan.secondsPerRun)
    const before = rssAnonBytes(server.pid)
    const { completed } = await load(plan.secondsPerRun * plan.rounds)
    const after = rssAnonBytes(server.pid)
    return { tensorBytes, bytes: (after - before) / completed, requests: completed }
  } finally {
    await fixture.dispose()
  }
}
