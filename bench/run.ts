/**
 * The bench runner: `npm run bench` (full, minutes) or `npm run bench -- --quick` (every figure,
 * smaller sizes, under 2 minutes on 2 cores). `--cpu-prof` also profiles the server child
 * (bench/results/profiles/; read them with `npx tsx bench/profile.ts <file>`).
 *
 * Progress goes to stderr; each suite prints a table on stdout; the last line on stdout is one
 * JSON object with the headline figures, each a ratio against a baseline measured in this run.
 * Results (JSON) and a plot (SVG) are written to bench/results/.
 */
import { mkdirSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { bytes, elapsedSeconds, gbPerSecond, ms, num, progress, ratio, table } from './format'
import { type GrpcPlan, grpcSuite } from './grpc'
import { type GrpcStreamPlan, grpcStreamSuite, grpcStreamTable } from './grpc-stream'
import { type InferPoint, inferSuite } from './infer'
import { type InferFloorPlan, inferFloorSuite, inferFloorTable } from './infer-floor'
import { TRANSPORTS, type Transport } from './infer-fixtures'
import { MemcpyBaseline } from './memcpy'
import { type OnnxPlan, onnxSuite } from './onnx'
import { type PeerCheckPlan, peerCheckSuite, peerCheckSummary, peerCheckTable } from './peer-check'
import { type Chart, renderSvg } from './plot'
import { type RegisterPoint, registerSuite } from './register'
import { modelTableSuite, type ModelTablePlan } from './model-table'
import { registerHttpSuite } from './register-http'
import { routeSuite } from './route'
import { ServerProcess } from './server-process'
import { type LeasePlan, type SharedInferPlan, sharedInferSuite, sharedLeaseSuite, tmpfsStorePath } from './shared-registry'
import { type SharedStatisticsPlan, sharedStatisticsSuite } from './shared-statistics'
import { removeAllObjects } from './shm-objects'
import { round } from './stats'
import { SyscallsProgram } from './syscalls'
import { viewsSuite } from './views'
import { type WorkersPlan, workersSuite } from './workers'

const KiB = 1024
const MiB = 1024 ** 2
const GiB = 1024 ** 3
const RESULTS_DIR = path.join(__dirname, 'results')

interface Plan {
  mode: 'quick' | 'full'
  onnx: OnnxPlan
  register: { sizes: number[], batchSeconds: number, batches: number }
  peerCheck: PeerCheckPlan
  views: { sizes: number[], iterations: number, batches: number }
  route: { rounds: number, secondsPerRun: number, connections: number, pipelining: number }
  modelTable: ModelTablePlan
  registerHttp: { seconds: number, connections: number }
  infer: { sizes: number[], headlineBytes: number, connections: number, targetSeconds: number, rounds: number, maxRequests: number }
  sharedLease: LeasePlan
  sharedInfer: SharedInferPlan
  sharedStatistics: SharedStatisticsPlan
  grpc: GrpcPlan
  grpcStream: GrpcStreamPlan
  inferFloor: InferFloorPlan
  workers: WorkersPlan
}

const PLANS: Record<Plan['mode'], Plan> = {
  quick: {
    mode: 'quick',
    register: { sizes: [4 * KiB, 64 * KiB, 64 * MiB, GiB], batchSeconds: 0.03, batches: 15 },
    peerCheck: { connections: 10_000, batchSeconds: 0.05, batches: 5 },
    views: { sizes: [4 * KiB, MiB, GiB], iterations: 50_000, batches: 5 },
    route: { rounds: 3, secondsPerRun: 1.5, connections: 10, pipelining: 8 },
    modelTable: { rounds: 6, secondsPerRun: 1.5, connections: 4, pipelining: 4 },
    registerHttp: { seconds: 2, connections: 4 },
    infer: { sizes: [64 * KiB, MiB, 4 * MiB], headlineBytes: 4 * MiB, connections: 2, targetSeconds: 1.5, rounds: 2, maxRequests: 20_000 },
    onnx: { identityBytes: 4 * MiB, largeBytes: 16 * MiB, smallBytes: MiB, secondsPerRun: 1, rounds: 2, connections: 2, bandwidthSizes: [16 * MiB, 64 * MiB], statusSeconds: 2 },
    sharedLease: { batchSeconds: 0.05, batches: 5 },
    sharedInfer: { rounds: 4, secondsPerRun: 1, connections: 2, warmupRequests: 2000 },
    sharedStatistics: { rounds: 6, secondsPerRun: 1.5, connections: 4, pipelining: 4, warmupRequests: 4000 },
    grpc: { tensorBytes: 4 * MiB, rounds: 2, secondsPerRun: 1, connections: 2 },
    grpcStream: { rounds: 2, secondsPerRun: 1 },
    inferFloor: { rounds: 3, secondsPerRun: 1, connections: 4 },
    workers: { rounds: 2, secondsPerRun: 1.5, connections: 16, pipelining: 4, warmupRequests: 3000 }
  },
  full: {
    mode: 'full',
    register: { sizes: [4 * KiB, 64 * KiB, MiB, 16 * MiB, 64 * MiB, 256 * MiB, GiB], batchSeconds: 0.2, batches: 9 },
    peerCheck: { connections: 10_000, batchSeconds: 0.2, batches: 9 },
    views: { sizes: [4 * KiB, 64 * KiB, MiB, 16 * MiB, 256 * MiB, GiB], iterations: 200_000, batches: 9 },
    route: { rounds: 6, secondsPerRun: 4, connections: 10, pipelining: 8 },
    modelTable: { rounds: 8, secondsPerRun: 4, connections: 4, pipelining: 4 },
    registerHttp: { seconds: 8, connections: 4 },
    infer: { sizes: [64 * KiB, 256 * KiB, MiB, 4 * MiB, 16 * MiB, 64 * MiB], headlineBytes: 16 * MiB, connections: 2, targetSeconds: 6, rounds: 3, maxRequests: 100_000 },
    onnx: { identityBytes: 16 * MiB, largeBytes: 64 * MiB, smallBytes: MiB, secondsPerRun: 3, rounds: 3, connections: 2, bandwidthSizes: [16 * MiB, 64 * MiB], statusSeconds: 5 },
    sharedLease: { batchSeconds: 0.2, batches: 9 },
    sharedInfer: { rounds: 6, secondsPerRun: 3, connections: 2, warmupRequests: 5000 },
    sharedStatistics: { rounds: 8, secondsPerRun: 4, connections: 4, pipelining: 4, warmupRequests: 10000 },
    grpc: { tensorBytes: 4 * MiB, rounds: 4, secondsPerRun: 3, connections: 2 },
    grpcStream: { rounds: 4, secondsPerRun: 3 },
    inferFloor: { rounds: 11, secondsPerRun: 1.5, connections: 4 },
    workers: { rounds: 4, secondsPerRun: 3, connections: 16, pipelining: 4, warmupRequests: 10000 }
  }
}

const GOALS = {
  routeRatio: { at: 'least', value: 0.9 },
  modelTableCpuRatio: { at: 'most', value: 1.05 },
  registerCycleVsSyscalls: { at: 'most', value: 2 },
  registerPeerCheckUs: { at: 'most', value: 20 },
  viewLargeVsSmall: { at: 'most', value: 1.5 },
  inferSpeedupVsJson: { at: 'least', value: 50 },
  inferSpeedupVsBinary: { at: 'least', value: 5 },
  shmBandwidthVsMemcpy: { at: 'least', value: 0.3 },
  ortShmSpeedupVsBinary: { at: 'least', value: 1 },
  ortShmBandwidthVsMemcpy: { at: 'least', value: 0.8 },
  ortStatusP50VsIdle: { at: 'most', value: 3 },
  ortStatusP99Ms: { at: 'most', value: 10 },
  ortConcurrentSpeedup: { at: 'least', value: 1.6 },
  ortAnonRssGrowthPerRequest: { at: 'most', value: 0 },
  shmAnonRssGrowth: { at: 'most', value: 0.1 },
  sharedRegistryCpuRatio: { at: 'most', value: 1.2 },
  sharedStatisticsCpuRatio: { at: 'most', value: 1.05 },
  sharedAcquireReleaseExtraUs: { at: 'most', value: 2 },
  grpcShmSpeedupVsRaw: { at: 'least', value: 5 },
  grpcVsHttpCpuRatio: { at: 'most', value: 1.3 },
  grpcStreamVsUnaryThroughput: { at: 'least', value: 1.5 },
  grpcVsHttpThroughput: { at: 'least', value: 0.9 },
  unixVsTcpThroughputHttp: { at: 'least', value: 1.1 },
  unixVsTcpThroughputGrpc: { at: 'least', value: 1.1 },
  inferFloorCpuRatio: { at: 'most', value: 1.3 },
  traceCostRatio: { at: 'most', value: 1.15 },
  workersThroughputRatio: { at: 'least', value: 1.5 },
  forwardedSequenceCostRatio: { at: 'most', value: 2.5 }
} as const

type Headline = keyof typeof GOALS

const met = (key: Headline, value: number) => GOALS[key].at === 'least' ? value >= GOALS[key].value : value <= GOALS[key].value
const goalText = (key: Headline) => `${GOALS[key].at === 'least' ? '>=' : '<='} ${GOALS[key].value}`

function parseArgs (argv: string[]) {
  const known = new Set(['--quick', '--cpu-prof'])
  const unknown = argv.filter((arg) => !known.has(arg))
  if (unknown.length > 0) throw new Error(`unknown option ${unknown.join(' ')} (options: --quick, --cpu-prof)`)
  return { quick: argv.includes('--quick'), cpuProf: argv.includes('--cpu-prof') }
}

function machine () {
  const cpus = os.cpus()
  return { cpus: cpus.length, cpuModel: cpus[0]?.model ?? 'unknown', memoryBytes: os.totalmem(), node: process.version, platform: `${os.type()} ${os.release()}` }
}

const pointOf = (points: InferPoint[], transport: Transport, tensorBytes: number) =>
  points.find((point) => point.transport === transport && point.tensorBytes === tensorBytes)

function inferRatios (points: InferPoint[], tensorBytes: number, memcpyMovedPerSecond: number) {
  const rps = (transport: Transport) => pointOf(points, transport, tensorBytes)?.requestsPerSecond ?? Number.NaN
  const shm = pointOf(points, 'shm', tensorBytes)
  return {
    vsJson: rps('shm') / rps('json'),
    vsBinary: rps('shm') / rps('binary'),
    bandwidthVsMemcpy: (shm?.tensorBytesPerSecond ?? Number.NaN) / memcpyMovedPerSecond
  }
}

async function main () {
  const options = parseArgs(process.argv.slice(2))
  const plan = PLANS[options.quick ? 'quick' : 'full']
  mkdirSync(RESULTS_DIR, { recursive: true })
  const profileDir = options.cpuProf ? path.join(RESULTS_DIR, 'profiles') : undefined
  if (profileDir !== undefined) {
    mkdirSync(profileDir, { recursive: true })
    writeFileSync(path.join(profileDir, '.gitignore'), '*\n')
  }
  const host = machine()
  progress(`fastify-triton-shm bench, ${plan.mode} mode: ${host.cpus} x ${host.cpuModel}, node ${host.node}`)
  const out: string[] = []
  const print = (text: string) => { out.push(text); process.stdout.write(text + '\n') }

  // Programmatic suites first, in this process, before any HTTP load has run in it.
  progress('compiling bench/syscalls.c')
  const syscalls = SyscallsProgram.compile()
  progress(`register + unregister, programmatic vs C syscalls, regions ${plan.register.sizes.map(bytes).join(', ')}`)
  const register = await registerSuite(syscalls, plan.register)
  print(table('Register + unregister, programmatic (ns per cycle, median of batches; the ratio, median of the batches\' own)',
    ['region', 'Registry', 'addon only', 'C syscalls', 'Registry / C'],
    register.map((point) => [bytes(point.regionBytes), num(point.registryNs), num(point.addonNs), num(point.syscallsNs), ratio(point.ratio)]),
    ['Registry: `new Registry().register(name, {key, byteSize})` + `unregister(name)`. addon only: `new MappedRange(key, 0, byteSize).unmap()`.',
      'C syscalls: bench/syscalls.c, shm_open + fstat + mmap + close + munmap of the same object, compiled with cc -O2.',
      'Neither makes an ArrayBuffer: a region\'s window is made at its first lease.']))

  progress(`peer check: the client of one TCP connection and its groups, alone and with ${plan.peerCheck.connections} other connections open`)
  const peerCheck = await peerCheckSuite(plan.peerCheck)
  print(peerCheckTable(peerCheck))

  progress(`acquire + release by region size: ${plan.views.sizes.map(bytes).join(', ')}`)
  const views = viewsSuite(plan.views)
  const smallView = views[0]
  const largeView = views[views.length - 1]
  print(table('Lease: acquire + release of a whole region (ns, median of batches)',
    ['region', 'ns', `vs ${bytes(smallView.regionBytes)}`],
    views.map((point) => [bytes(point.regionBytes), num(point.ns), ratio(point.ns / smallView.ns)]),
    ['Objects are sparse (ftruncate only): a 1 GiB region costs address space, not memory.']))

  progress(`acquire + release of ${bytes(64 * KiB)}, shared registry (store on tmpfs) vs in-process`)
  const sharedLease = sharedLeaseSuite(plan.sharedLease, tmpfsStorePath())
  const leaseNs = sharedLease.ns
  print(table(`Lease with a shared registry: acquire + release of ${bytes(sharedLease.regionBytes)}, unchanged registry (ns, median of batches)`,
    ['case', 'in-process', 'shared', 'shared / in-process', 'extra'],
    (['concurrent', 'serial'] as const).map((leaseCase) => [
      leaseCase === 'concurrent' ? 'another lease live' : 'alone (first lease, last release)',
      num(leaseNs[leaseCase].inProcess), num(leaseNs[leaseCase].shared),
      ratio(leaseNs[leaseCase].shared / leaseNs[leaseCase].inProcess), `${num((leaseNs[leaseCase].shared - leaseNs[leaseCase].inProcess) / 1000)} µs`]),
    ['shared: `new Registry({ sharedRegistry: { path } })`, the SQLite store in a directory on tmpfs (/dev/shm), one process.',
      'another lease live: the steady state of a busy service: one atomic load of the registry\'s revision per call.',
      'alone: the first lease and the last release also add to this process\'s counter in the lease table (atomics; no store write).']))

  const memcpy = new MemcpyBaseline()
  progress(`compiling bench/server.ts to plain JS and starting it as a child process${profileDir === undefined ? '' : ` (CPU profile to ${profileDir})`}`)
  const server = await ServerProcess.start({ cpuProfileDir: profileDir })
  let route, modelTable, registerHttp, infer, onnx, grpc, grpcStream, inferFloor
  const rssAfter: Record<string, number> = {}
  try {
    rssAfter.start = (await server.stats()).peakRssBytes
    progress(`route: status (16 regions) vs bare route, ${plan.route.rounds} rounds of ${plan.route.secondsPerRun} s each`)
    route = await routeSuite(server, plan.route)
    rssAfter.route = (await server.stats()).peakRssBytes
    progress(`model table: add_sub_fp32 infer route vs a hand-written one, ${plan.modelTable.rounds} rounds of ${plan.modelTable.secondsPerRun} s each`)
    modelTable = await modelTableSuite(server, plan.modelTable)
    progress(`register + unregister over HTTP, ${plan.registerHttp.seconds} s`)
    registerHttp = await registerHttpSuite(server, plan.registerHttp)
    rssAfter.registerHttp = (await server.stats()).peakRssBytes
    progress(`inference, tensors of ${plan.infer.sizes.map(bytes).join(', ')}`)
    infer = await inferSuite(server, memcpy, { ...plan.infer, transports: TRANSPORTS })
    rssAfter.infer = (await server.stats()).peakRssBytes
    onnx = await onnxSuite(server, plan.onnx)
    rssAfter.onnx = (await server.stats()).peakRssBytes
    progress(`KServe over gRPC at ${bytes(plan.grpc.tensorBytes)}: shared memory vs raw_input_contents, and vs HTTP, ${plan.grpc.rounds} rounds`)
    grpc = await grpcSuite(server, plan.grpc)
    rssAfter.grpc = (await server.stats()).peakRssBytes
    progress(`one client, simple over shared memory: HTTP, ModelInfer, ModelStreamInfer, ${plan.grpcStream.rounds} rounds`)
    grpcStream = await grpcStreamSuite(server, plan.grpcStream)
    progress(`the infer floor: simple_js over shared memory, a bare route and each step of the infer path, ${plan.inferFloor.rounds} rounds`)
    inferFloor = await inferFloorSuite(server, plan.inferFloor)
  } finally {
    progress('stopping the server child')
    await server.stop()
  }
  progress(`inference through shared memory at ${bytes(64 * KiB)}: a server with sharedRegistry (store on tmpfs) vs one without`)
  const sharedInfer = await sharedInferSuite(plan.sharedInfer, tmpfsStorePath())
  progress(`statistics of the whole service: two servers with sharedRegistry, shared statistics vs this process's, ${plan.sharedStatistics.rounds} rounds`)
  const sharedStatistics = await sharedStatisticsSuite(plan.sharedStatistics)
  const workers = await workersSuite(plan.workers)

  print(table(`Route: GET /v2/systemsharedmemory/status vs a bare Fastify route (${route.regions} regions, ${route.responseBytes}-byte JSON)`,
    ['route', 'req/s', 'p50', 'p99', 'server CPU/req', 'server CPU busy'],
    [route.status, route.bare].map((figures) => [figures.path, num(figures.requestsPerSecond), ms(figures.latencyMs.p50),
      ms(figures.latencyMs.p99), `${num(figures.serverCpuMicrosPerRequest)} µs`, `${Math.round(figures.serverCpuBusy * 100)}%`]),
    [`routeRatio (status req/s / bare req/s, median of ${route.rounds} alternating rounds of ${route.secondsPerRun} s, ${route.connections} connections x ${route.pipelining} pipelined): ${ratio(route.ratio)}`,
      'Latencies include waiting behind the requests pipelined before them. Server CPU busy near 100% means the server, not the load generator, set the rate.',
      `server CPU per request, bare / status: ${ratio(route.cpuRatio)} (does not depend on whether the load generator kept the server busy)`]))

  print(table(`Model table: POST /v2/models/add_sub_fp32/infer vs a hand-written infer route (${bytes(modelTable.tensorBytes)} tensors in shared memory)`,
    ['route', 'req/s', 'server CPU/req'],
    [['model table (kserveModels)', num(modelTable.tableRequestsPerSecond), `${num(modelTable.tableCpuMicrosPerRequest)} µs`],
      ['hand-written (readInferRequest, run, respond)', num(modelTable.handRequestsPerSecond), `${num(modelTable.handCpuMicrosPerRequest)} µs`]],
    [`modelTableCpuRatio (server CPU per request, table / hand-written, ${modelTable.rounds} alternating rounds of ${modelTable.secondsPerRun} s, ` +
      `${modelTable.connections} connections x ${modelTable.pipelining} pipelined), median of the rounds: ${ratio(modelTable.cpuRatio)} (all rounds together: ${ratio(modelTable.totalCpuRatio)})`,
    'The table also resolves the model and version and times every request into its statistics.']))

  print(table(`Register + unregister over HTTP (${bytes(registerHttp.regionBytes)} region, ${registerHttp.connections} connections, ${num(registerHttp.seconds)} s)`,
    ['request', 'p50', 'p99', 'samples'],
    [['register', ms(registerHttp.registerMs.p50), ms(registerHttp.registerMs.p99), registerHttp.registerMs.samples],
      ['unregister', ms(registerHttp.unregisterMs.p50), ms(registerHttp.unregisterMs.p99), registerHttp.unregisterMs.samples]],
    [`${num(registerHttp.cyclesPerSecond)} register + unregister pairs per second`]))

  const memcpyResult = MemcpyBaseline.summarize(infer.memcpySeconds)
  print(table(`Inference: add_sub_fp32, ${plan.infer.connections} connections (sizes are per tensor; each request reads 2 and writes 2)`,
    ['tensor', 'transport', 'req/s', 'p50', 'p99', 'requests', 'tensor bytes/s', 'server peak RSS'],
    infer.points.map((point) => point.skipped !== undefined
      ? [bytes(point.tensorBytes), point.transport, 'not measured', '', '', '', '', '']
      : [bytes(point.tensorBytes), point.transport, num(point.requestsPerSecond as number), ms(point.latencyMs?.p50 as number),
          ms(point.latencyMs?.p99 as number), point.completed as number, gbPerSecond(point.tensorBytesPerSecond as number),
          bytes(point.serverPeakRssBytes as number)]),
    [...new Set(infer.points.filter((point) => point.skipped).map((point) => `json ${bytes(point.tensorBytes)} not measured: ${point.skipped}.`)),
      'shm: inputs and outputs in registered regions. binary: binary tensor data extension (Inference-Header-Content-Length, binary outputs).',
      'json: inputs and outputs as JSON `data`. Values: random FP32 in [0, 1). Every transport\'s outputs were checked element by element once per size.',
      `memcpy baseline: Buffer#copy of ${bytes(memcpyResult.bufferBytes)}, one core, ${infer.memcpySeconds.length} copies between the rounds: ` +
        `${gbPerSecond(memcpyResult.copiedBytesPerSecond)} copied = ${gbPerSecond(memcpyResult.movedBytesPerSecond)} moved (read + written).`]))

  const sizes = plan.infer.sizes
  print(table('Inference: shared memory against the other transports, by tensor size',
    ['tensor', 'shm / json', 'shm / binary', 'shm bytes moved / memcpy bytes moved', 'shm bytes moved / memcpy bytes copied'],
    sizes.map((tensorBytes) => {
      const ratios = inferRatios(infer.points, tensorBytes, memcpyResult.movedBytesPerSecond)
      return [bytes(tensorBytes), Number.isNaN(ratios.vsJson) ? 'n/a' : ratio(ratios.vsJson), ratio(ratios.vsBinary),
        ratio(ratios.bandwidthVsMemcpy), ratio(ratios.bandwidthVsMemcpy * 2)]
    })))

  print(table(`Inference with a shared registry: add_sub_fp32 through shared memory, ${bytes(sharedInfer.tensorBytes)} tensors, ${plan.sharedInfer.connections} connections`,
    ['server', 'req/s', 'server CPU/req', 'requests'],
    (['inProcess', 'shared'] as const).map((kind) => [kind === 'shared' ? 'sharedRegistry' : 'in-process registry',
      num(sharedInfer[kind].requestsPerSecond), `${num(sharedInfer[kind].serverCpuMicrosPerRequest)} µs`, sharedInfer[kind].requests]),
    [`sharedRegistryCpuRatio (server CPU per request, shared / in-process, ${plan.sharedInfer.rounds} alternating runs of ${plan.sharedInfer.secondsPerRun} s each): ` +
      ratio(sharedInfer.cpuRatio),
    'Two server children, one server process each; the shared one\'s SQLite store in a directory on tmpfs (/dev/shm).']))

  print(table(`Statistics of the whole service: add_sub_fp32 through shared memory, ${bytes(sharedStatistics.tensorBytes)} tensors, ` +
    `${sharedStatistics.connections} connections x ${sharedStatistics.pipelining} pipelined`,
  ['statistics', 'req/s', 'server CPU/req'],
  (['shared', 'process'] as const).map((kind) => [kind === 'shared' ? 'shared (the file beside the store)' : 'this process\'s (processStatistics)',
    num(sharedStatistics.requestsPerSecond[kind]), `${num(sharedStatistics.cpuMicrosPerRequest[kind])} µs`]),
  [`sharedStatisticsCpuRatio (server CPU per request, shared / process, ${sharedStatistics.rounds} alternating rounds of ${sharedStatistics.secondsPerRun} s), ` +
    `median of the rounds: ${ratio(sharedStatistics.cpuRatio)} (all rounds together: ${ratio(sharedStatistics.totalCpuRatio)})`,
  `Both servers have a shared registry (each its own store on tmpfs). The shared server's statistics counted every request: ${sharedStatistics.counted ? 'yes' : 'NO'}.`,
  `Counting one request, in this process: ${num(sharedStatistics.countNs.shared)} ns into shared cells, ${num(sharedStatistics.countNs.process)} ns into a table's own.`]))

  const anonGrowth = (transport: 'shm' | 'binary') => (onnx.rssAnon[transport].large - onnx.rssAnon[transport].small) / onnx.largeBytes
  print(table('ONNX Runtime through fastify-triton-shm/onnxruntime: shared memory against binary data',
    ['model', 'tensor', 'shm req/s', 'binary req/s', 'shm / binary'],
    [['identity_fp32', bytes(onnx.identity.tensorBytes), num(onnx.identity.shm), num(onnx.identity.binary), ratio(onnx.identity.shm / onnx.identity.binary)],
      ['tiny_classifier', bytes(onnx.classifier.inputBytes), num(onnx.classifier.shm), num(onnx.classifier.binary), ratio(onnx.classifier.shm / onnx.classifier.binary)]],
    [`identity_fp32 through shm, 1 connection: ORT copied ${onnx.bandwidthBySize.map(({ tensorBytes, bytesPerSecond }) => `${gbPerSecond(bytesPerSecond)} at ${bytes(tensorBytes)}`).join(', ')} ` +
      `(memcpy: ${gbPerSecond(memcpyResult.copiedBytesPerSecond)} copied).`,
    `GET /v2/systemsharedmemory/status: idle p50 ${ms(onnx.status.idle.p50)}, p99 ${ms(onnx.status.idle.p99)}; while identity_fp32 at ${bytes(onnx.status.tensorBytes)} ` +
      `ran back to back through shm (${onnx.status.inferences} inferences): p50 ${ms(onnx.status.busy.p50)}, p99 ${ms(onnx.status.busy.p99)}.`,
    `tiny_classifier through shm: one client ${num(onnx.concurrent.one)} req/s, two clients ${num(onnx.concurrent.two)} req/s.`,
    `Server RssAnon (private memory), its rise under identity_fp32 at ${bytes(onnx.smallBytes)} and ${bytes(onnx.largeBytes)}: ` +
      `shm ${bytes(onnx.rssAnon.shm.small)} and ${bytes(onnx.rssAnon.shm.large)}, binary ${bytes(onnx.rssAnon.binary.small)} and ${bytes(onnx.rssAnon.binary.large)}.`,
    'Every output was checked once per model and transport: identity byte for byte, the classifier against its JavaScript reference.']))

  print(table(`KServe over gRPC: add_sub_fp32, ${bytes(grpc.tensorBytes)} tensors, ${plan.grpc.connections} calls in flight`,
    ['case', 'req/s', 'server CPU/req', 'requests'],
    ([['grpcShm', 'gRPC, shared memory'], ['grpcRaw', 'gRPC, raw_input_contents / raw_output_contents'], ['httpShm', 'HTTP, shared memory']] as const)
      .map(([kind, label]) => [label, num(grpc.cases[kind].requestsPerSecond), `${num(grpc.cases[kind].serverCpuMicrosPerRequest)} µs`, grpc.cases[kind].requests]),
    [`grpcShmSpeedupVsRaw (req/s): ${ratio(grpc.shmSpeedupVsRaw)}; grpcVsHttpCpuRatio (server CPU per shared memory inference, gRPC / HTTP): ${ratio(grpc.cpuRatioVsHttp)}`,
      `${plan.grpc.rounds} alternating rounds of ${plan.grpc.secondsPerRun} s per case; the clients: GrpcKServeClient and KServeClient (fetch) in the runner.`]))

  print(grpcStreamTable(grpcStream, plan.grpcStream))

  print(inferFloorTable(inferFloor))

  print(table('Several processes: two node:cluster workers against one process, and a sequence\'s requests handed to their owner',
    ['case', 'req/s', 'server CPU/req'],
    [['one process, add_sub_fp32 over shm', num(workers.requestsPerSecond.one), `${num(workers.serverCpuMicrosPerRequest.one)} µs`],
      ['two workers (WORKERS=2), add_sub_fp32 over shm', num(workers.requestsPerSecond.two), `${num(workers.serverCpuMicrosPerRequest.two)} µs (every process)`],
      ['a sequence request served by its owner', num(workers.sequence.requestsPerSecond.local), `${num(workers.sequence.cpuMicrosPerRequest.local)} µs`],
      ['a sequence request handed to its owner', num(workers.sequence.requestsPerSecond.forwarded), `${num(workers.sequence.cpuMicrosPerRequest.forwarded)} µs`]],
    [`workersThroughputRatio (req/s, two workers / one process, ${bytes(workers.tensorBytes)} tensors, ${plan.workers.connections} connections x ${plan.workers.pipelining} ` +
      `pipelined, the load generator on the same cores): ${ratio(workers.throughputRatio)}; the lean pipelined generator's own CPU: ` +
      `${num(workers.generatorCpuMicrosPerRequest)} µs/req, so at most 2 x one's / (two's + its) = ` +
      `${ratio(2 * workers.serverCpuMicrosPerRequest.one / (workers.serverCpuMicrosPerRequest.two + workers.generatorCpuMicrosPerRequest))} by CPU per request`,
    `forwardedSequenceCostRatio (server CPU per request of both processes, handed over / served by the owner, simple_dyna_sequence, one request at a time): ${ratio(workers.sequence.costRatio)}`,
    `${plan.workers.rounds} alternating rounds of ${plan.workers.secondsPerRun} s per case.`]))

  const headlineBytes = plan.infer.headlineBytes
  const headlineRatios = inferRatios(infer.points, headlineBytes, memcpyResult.movedBytesPerSecond)
  const worstRegister = register.reduce((worst, point) => point.ratio > worst.ratio ? point : worst)
  const headline: Record<Headline, number> = {
    routeRatio: route.ratio,
    modelTableCpuRatio: modelTable.cpuRatio,
    registerCycleVsSyscalls: worstRegister.ratio,
    registerPeerCheckUs: peerCheck.loaded.checkCachedUs,
    viewLargeVsSmall: largeView.ns / smallView.ns,
    inferSpeedupVsJson: headlineRatios.vsJson,
    inferSpeedupVsBinary: headlineRatios.vsBinary,
    shmBandwidthVsMemcpy: headlineRatios.bandwidthVsMemcpy,
    ortShmSpeedupVsBinary: onnx.identity.shm / onnx.identity.binary,
    ortShmBandwidthVsMemcpy: Math.min(...onnx.bandwidthBySize.map(({ bytesPerSecond }) => bytesPerSecond / memcpyResult.copiedBytesPerSecond)),
    ortStatusP50VsIdle: onnx.status.busy.p50 / onnx.status.idle.p50,
    ortStatusP99Ms: onnx.status.busy.p99,
    ortConcurrentSpeedup: onnx.concurrent.two / onnx.concurrent.one,
    ortAnonRssGrowthPerRequest: onnx.anonPerRequest.bytes,
    shmAnonRssGrowth: anonGrowth('shm'),
    sharedRegistryCpuRatio: sharedInfer.cpuRatio,
    sharedStatisticsCpuRatio: sharedStatistics.cpuRatio,
    sharedAcquireReleaseExtraUs: (leaseNs.concurrent.shared - leaseNs.concurrent.inProcess) / 1000,
    grpcShmSpeedupVsRaw: grpc.shmSpeedupVsRaw,
    grpcVsHttpCpuRatio: grpc.cpuRatioVsHttp,
    grpcStreamVsUnaryThroughput: grpcStream.streamVsUnary,
    grpcVsHttpThroughput: grpcStream.grpcVsHttp,
    unixVsTcpThroughputHttp: grpcStream.unixVsTcp.http,
    unixVsTcpThroughputGrpc: grpcStream.unixVsTcp.grpc,
    inferFloorCpuRatio: inferFloor.cpuRatio,
    traceCostRatio: inferFloor.traceCostRatio,
    workersThroughputRatio: workers.throughputRatio,
    forwardedSequenceCostRatio: workers.sequence.costRatio
  }
  const how: Record<Headline, string> = {
    routeRatio: `status / bare req/s, ${route.regions} regions`,
    modelTableCpuRatio: `server CPU per request, add_sub_fp32 infer route over shm at ${bytes(modelTable.tensorBytes)}, table / hand-written`,
    registerCycleVsSyscalls: `worst region size: ${bytes(worstRegister.regionBytes)} (${register.map((point) => `${bytes(point.regionBytes)} ${num(point.ratio)}`).join(', ')})`,
    registerPeerCheckUs: `µs, the client of one TCP connection and its groups (kept by a UserGroupCache), ${num(peerCheck.connections)} other ` +
      `connections open (groups read each time: ${num(peerCheck.loaded.checkUs)}; none open: ${num(peerCheck.idle.checkCachedUs)}; ` +
      `/proc/net/tcp read once: ${num(peerCheck.loaded.procNetTcpUs)})`,
    viewLargeVsSmall: `${bytes(largeView.regionBytes)} vs ${bytes(smallView.regionBytes)}`,
    inferSpeedupVsJson: `req/s, ${bytes(headlineBytes)} tensors`,
    inferSpeedupVsBinary: `req/s, ${bytes(headlineBytes)} tensors`,
    shmBandwidthVsMemcpy: `${bytes(headlineBytes)} tensors; read + written on both sides (vs bytes copied: ${num(headlineRatios.bandwidthVsMemcpy * 2)})`,
    ortShmSpeedupVsBinary: `identity_fp32, ${bytes(onnx.identity.tensorBytes)}, req/s (tiny_classifier: ${num(onnx.classifier.shm / onnx.classifier.binary)})`,
    ortShmBandwidthVsMemcpy: 'identity_fp32 through shm, the lower of ' +
      onnx.bandwidthBySize.map(({ tensorBytes, bytesPerSecond }) => `${bytes(tensorBytes)} ${num(bytesPerSecond / memcpyResult.copiedBytesPerSecond)}`).join(', ') +
      ': bytes ORT copied / memcpy bytes copied',
    ortStatusP50VsIdle: `status route p50 while identity_fp32 ${bytes(onnx.status.tensorBytes)} runs back to back / idle p50`,
    ortStatusP99Ms: `ms, status route p99 while identity_fp32 ${bytes(onnx.status.tensorBytes)} runs back to back`,
    ortConcurrentSpeedup: 'tiny_classifier through shm, req/s of two clients / one',
    ortAnonRssGrowthPerRequest: `bytes, RssAnon after - before ${onnx.anonPerRequest.requests} requests, identity_fp32 ${bytes(onnx.anonPerRequest.tensorBytes)} through shm, / requests`,
    shmAnonRssGrowth: `RssAnon rise at ${bytes(onnx.largeBytes)} - at ${bytes(onnx.smallBytes)}, / ${bytes(onnx.largeBytes)} (binary: ${num(anonGrowth('binary'))})`,
    sharedRegistryCpuRatio: `server CPU per request, shm inference at ${bytes(sharedInfer.tensorBytes)}, sharedRegistry / in-process`,
    sharedStatisticsCpuRatio: `server CPU per request, add_sub_fp32 over shm at ${bytes(sharedStatistics.tensorBytes)}, shared statistics / this process's`,
    sharedAcquireReleaseExtraUs: 'µs, acquire + release while another lease is live (alone, first lease + last release: ' +
      `${num((leaseNs.serial.shared - leaseNs.serial.inProcess) / 1000)} µs extra)`,
    grpcShmSpeedupVsRaw: `req/s, add_sub_fp32 over gRPC, ${bytes(grpc.tensorBytes)} tensors: shared memory / raw_input_contents`,
    grpcVsHttpCpuRatio: `server CPU per shared memory inference at ${bytes(grpc.tensorBytes)}, gRPC / HTTP`,
    grpcStreamVsUnaryThroughput: 'req/s, simple over shm, one client, one request at a time: a grpc-js ModelStreamInfer stream / grpc-js ModelInfer calls',
    grpcVsHttpThroughput: 'req/s, simple over shm, one client, one request at a time: ModelInfer / HTTP, from lean clients ' +
      `(node:http2, node:http; grpc-js ModelInfer / HTTP: ${num(grpcStream.grpcJsVsHttp)}; the same clients against bare node:http2 / node:http servers: ` +
      `${num(grpcStream.floorGrpcVsHttp)}; a server of the package's own HTTP/2 / node:http: ${num(grpcStream.floorOwnGrpcVsHttp)})`,
    unixVsTcpThroughputHttp: 'req/s, simple over shm, one lean HTTP client, one request at a time: over the server\'s Unix socket / over TCP',
    unixVsTcpThroughputGrpc: 'req/s, simple over shm, one lean ModelInfer client, one request at a time: over the server\'s Unix socket / over TCP',
    inferFloorCpuRatio: `server CPU per request, simple_js over shm, ${inferFloor.connections} connections: the model table's infer route / a bare Fastify route ` +
      'answering the same bytes (each step\'s cost in the infer floor table)',
    traceCostRatio: `server CPU per request, simple_js over shm, ${inferFloor.connections} connections, the model table's infer route: every request traced to a trace file ` +
      '(level TIMESTAMPS, rate 1) / tracing off',
    workersThroughputRatio: `req/s, add_sub_fp32 over shm at ${bytes(workers.tensorBytes)}, WORKERS=2 / one process, on ${host.cpus} cores with the load generator ` +
      `(${num(workers.generatorCpuMicrosPerRequest)} µs/req of CPU; the server ${num(workers.serverCpuMicrosPerRequest.one)})`,
    forwardedSequenceCostRatio: 'server CPU per request (both processes), a sequence request handed to its owner / served by it'
  }
  const peakRssBytes = Math.max(...Object.values(rssAfter))
  print(table(`Summary (${plan.mode} run, ${elapsedSeconds().toFixed(0)} s)`, ['figure', 'value', 'goal', 'met', 'measured as'],
    (Object.keys(GOALS) as Headline[]).map((key) => [key, num(headline[key]), goalText(key), met(key, headline[key]) ? 'yes' : 'NO', how[key]]),
    [`Server peak RSS: ${bytes(peakRssBytes)} (after route ${bytes(rssAfter.route)}, register over HTTP ${bytes(rssAfter.registerHttp)}, inference ${bytes(rssAfter.infer)}).`,
      `Sizes: inference tensors ${sizes.map(bytes).join(', ')} (headline ${bytes(headlineBytes)}); register regions ${plan.register.sizes.map(bytes).join(', ')}; ` +
      `lease regions ${plan.views.sizes.map(bytes).join(', ')}.`,
      `Machine: ${host.cpus} x ${host.cpuModel}, ${bytes(host.memoryBytes)}, ${host.platform}, node ${host.node}.`]))

  const latency = Object.fromEntries(infer.points.filter((point) => point.tensorBytes === headlineBytes && point.latencyMs !== undefined)
    .map((point) => [`infer_${point.transport}`, { p50Ms: round(point.latencyMs?.p50 as number), p99Ms: round(point.latencyMs?.p99 as number) }]))
  const summary = {
    mode: plan.mode,
    ...Object.fromEntries(Object.entries(headline).map(([key, value]) => [key, round(value)])),
    tensorBytes: headlineBytes,
    registerRegionBytes: worstRegister.regionBytes,
    registerCycleVsSyscallsBySize: Object.fromEntries(register.map((point) => [point.regionBytes, round(point.ratio)])),
    ...peerCheckSummary(peerCheck),
    viewRegionBytes: [smallView.regionBytes, largeView.regionBytes],
    routeCpuRatio: round(route.cpuRatio),
    ortClassifierShmSpeedupVsBinary: round(onnx.classifier.shm / onnx.classifier.binary),
    ortShmBandwidthVsMemcpyBySize: Object.fromEntries(onnx.bandwidthBySize.map(({ tensorBytes, bytesPerSecond }) => [tensorBytes, round(bytesPerSecond / memcpyResult.copiedBytesPerSecond)])),
    binaryAnonRssGrowth: round(anonGrowth('binary')),
    sharedFirstLeaseExtraUs: round((leaseNs.serial.shared - leaseNs.serial.inProcess) / 1000),
    sharedAcquireReleaseRatio: round(leaseNs.concurrent.shared / leaseNs.concurrent.inProcess),
    sharedFirstLeaseRatio: round(leaseNs.serial.shared / leaseNs.serial.inProcess),
    latency: {
      ...latency,
      status_idle: { p50Ms: round(onnx.status.idle.p50), p99Ms: round(onnx.status.idle.p99) },
      status_while_onnx: { p50Ms: round(onnx.status.busy.p50), p99Ms: round(onnx.status.busy.p99) },
      register_http: { p50Ms: round(registerHttp.registerMs.p50), p99Ms: round(registerHttp.registerMs.p99) },
      unregister_http: { p50Ms: round(registerHttp.unregisterMs.p50), p99Ms: round(registerHttp.unregisterMs.p99) }
    },
    serverPeakRssBytes: peakRssBytes,
    memcpyCopiedBytesPerSecond: round(memcpyResult.copiedBytesPerSecond),
    goalsMet: Object.fromEntries((Object.keys(GOALS) as Headline[]).map((key) => [key, met(key, headline[key])])),
    seconds: round(elapsedSeconds())
  }

  const suffix = plan.mode === 'quick' ? '-quick' : ''
  const resultsFile = path.join(RESULTS_DIR, `results${suffix}.json`)
  const plotFile = path.join(RESULTS_DIR, `scaling${suffix}.svg`)
  writeFileSync(resultsFile, JSON.stringify({ summary, machine: host, plan, register, peerCheck, views, route, modelTable, registerHttp, memcpy: memcpyResult, infer, onnx, sharedLease, sharedInfer, sharedStatistics, grpc, grpcStream, workers, serverPeakRss: rssAfter, tables: out.join('\n') }, null, 2) + '\n')
  writeFileSync(plotFile, renderSvg(`fastify-triton-shm bench (${plan.mode})`,
    `${host.cpus} x ${host.cpuModel}, node ${host.node}; add_sub_fp32, ${plan.infer.connections} connections; ${new Date().toISOString().slice(0, 16)}Z`,
    charts(infer.points, sizes, memcpyResult.movedBytesPerSecond, register, views)))
  progress(`wrote ${path.relative(process.cwd(), resultsFile)} and ${path.relative(process.cwd(), plotFile)}`)
  process.stdout.write(JSON.stringify(summary) + '\n')
}

const COLORS: Record<Transport, string> = { shm: '#1f77b4', binary: '#ff7f0e', json: '#2ca02c' }

function charts (points: InferPoint[], sizes: number[], memcpyMoved: number, register: RegisterPoint[],
  views: ReturnType<typeof viewsSuite>): Chart[] {
  const measured = (transport: Transport) => points.filter((point) => point.transport === transport && point.skipped === undefined)
  const ratioSeries = (label: string, color: string, pick: (ratios: ReturnType<typeof inferRatios>) => number) => ({
    label, color, points: sizes.map((x) => ({ x, y: pick(inferRatios(points, x, memcpyMoved)) })).filter((point) => Number.isFinite(point.y))
  })
  return [
    {
      title: 'Inference throughput',
      xLabel: 'tensor size (each of 2 inputs, 2 outputs)',
      yLabel: 'requests per second',
      series: TRANSPORTS.map((transport) => ({ label: transport, color: COLORS[transport], points: measured(transport).map((point) => ({ x: point.tensorBytes, y: point.requestsPerSecond as number })) }))
    },
    {
      title: 'Shared memory vs the other transports',
      xLabel: 'tensor size',
      yLabel: 'ratio',
      series: [
        ratioSeries('shm / json req/s', COLORS.json, (ratios) => ratios.vsJson),
        ratioSeries('shm / binary req/s', COLORS.binary, (ratios) => ratios.vsBinary),
        ratioSeries('shm / memcpy bytes moved', '#9467bd', (ratios) => ratios.bandwidthVsMemcpy)
      ],
      references: [
        { label: 'goal vs json 50', y: 50, color: COLORS.json },
        { label: 'goal vs binary 5', y: 5, color: COLORS.binary },
        { label: 'goal vs memcpy 0.3', y: 0.3, color: '#9467bd' }
      ]
    },
    {
      title: 'Inference latency',
      xLabel: 'tensor size',
      yLabel: 'milliseconds',
      series: TRANSPORTS.flatMap((transport) => [
        { label: `${transport} p50`, color: COLORS[transport], points: measured(transport).map((point) => ({ x: point.tensorBytes, y: point.latencyMs?.p50 as number })) },
        { label: `${transport} p99`, color: COLORS[transport], dashed: true, points: measured(transport).map((point) => ({ x: point.tensorBytes, y: point.latencyMs?.p99 as number })) }
      ])
    },
    {
      title: 'Register + unregister and lease cost by region size',
      xLabel: 'region size',
      yLabel: 'nanoseconds',
      series: [
        { label: 'register (Registry)', color: '#d62728', points: register.map((point) => ({ x: point.regionBytes, y: point.registryNs })) },
        { label: 'register (C syscalls)', color: '#d62728', dashed: true, points: register.map((point) => ({ x: point.regionBytes, y: point.syscallsNs })) },
        { label: 'acquire + release', color: '#17becf', points: views.map((point) => ({ x: point.regionBytes, y: point.ns })) }
      ]
    }
  ]
}

main().catch((error) => {
  process.stderr.write(`bench failed: ${(error as Error).stack ?? String(error)}\n`)
  removeAllObjects()
  process.exit(1)
})
