/**
 * The bench's server child: the example service (plugin, /v2 routes, infer route), plus
 *   GET /bench/bare  a bare Fastify route answering fixed JSON bytes (the route suite's baseline),
 *   GET /bench/rss   this process's memory and CPU time (peak RSS is reported from it),
 *   POST /bench/hand/models/<m>/infer  a hand-written infer route (the model table suite's baseline),
 *   POST /bench/floor/<step>/models/<m>/infer  the infer floor's ladder (bench/infer-floor.ts): a
 *        bare route, then each step of the package's infer path added to it,
 * and KServe over gRPC on a port of its own, and the transports' own floor on two more
 * (bench/transport-floor.ts). With BENCH_SOCKET_DIR set, HTTP and gRPC are served on Unix sockets
 * there too (http.sock, grpc.sock), as the example serves HTTP_SOCKET and GRPC_SOCKET.
 * With BENCH_TRACE_FILE set, that is its trace file (tracing off until a suite turns it on).
 * With BENCH_SHARED_REGISTRY_PATH set, its registry is a shared one with its store at that path;
 * with BENCH_PROCESS_STATISTICS=1 too, its model table counts statistics in this process only.
 * With BENCH_WORKERS=N (N > 1) it runs as the example does with WORKERS=N (example/cluster.ts): a
 * primary and N node:cluster workers on one port, sharing one registry; the primary reports the
 * port once every worker listens, and stops them when told to.
 * Started by bench/server-process.ts (compiled by bench/server-build.ts, run on plain node) with an
 * IPC channel: it reports its port, takes the bare route's bytes, and exits when told to or when
 * its parent goes away.
 */
import cluster from 'node:cluster'
import net from 'node:net'
import { once } from 'node:events'
import path from 'node:path'
import v8 from 'node:v8'
import type { FastifyInstance } from 'fastify'
import { runPrimary, workerCount } from '../example/cluster'
import { loadModels, sumAndDifference } from '../example/models'
import { buildServer } from '../example/server'
import { floorRoutes, handInferRoute } from './floor-routes'
import { startTransportFloor } from './transport-floor'
import { type ChildMessage, FLOOR_MODEL, type ParentMessage, type ServerStats } from './server-protocol'

function stats (): ServerStats {
  const usage = process.resourceUsage()
  return {
    rssBytes: process.memoryUsage.rss(),
    peakRssBytes: usage.maxRSS * 1024,
    cpuMicros: usage.userCPUTime + usage.systemCPUTime
  }
}

/** The primary of `workers` workers: reports their port once all listen (each worker tells it, as
 * it tells the runner when alone); stops them when told to. */
function runBenchPrimary (workers: number): void {
  let listening = 0
  cluster.on('message', (_worker, message: ChildMessage) => {
    if (message.type === 'listening' && ++listening === workers) process.send?.(message)
  })
  const stop = () => process.kill(process.pid, 'SIGTERM')
  process.on('message', (message: ParentMessage) => { if (message.type === 'stop') stop() })
  process.on('disconnect', stop)
  runPrimary(workers)
}

/** Runs a scavenge (`--expose-gc`); the new space's bytes in use after it, null without the flag. */
function scavenged (): number | null {
  const collect = (globalThis as { gc?: (options: { type: 'minor' }) => void }).gc
  if (collect === undefined) return null
  collect({ type: 'minor' })
  return v8.getHeapSpaceStatistics().find((space) => space.space_name === 'new_space')?.space_used_size ?? null
}

/** HTTP on a Unix socket beside the port: its connections handed to the app's server (example/server.ts's way). */
async function listenBeside (app: FastifyInstance, socketPath: string): Promise<void> {
  const beside = net.createServer((connection) => app.server.emit('connection', connection))
  beside.listen(socketPath)
  await once(beside, 'listening')
  app.server.once('close', () => beside.close())
}

async function main () {
  const workers = workerCount(process.env.BENCH_WORKERS)
  if (workers > 1 && cluster.isPrimary) return runBenchPrimary(workers)
  // JSON `data` is one of the transports measured: its parts may be as large as V8's strings allow.
  const storePath = process.env.BENCH_SHARED_REGISTRY_PATH ?? process.env.SHARED_REGISTRY_PATH
  const models = await loadModels()
  // The infer floor's model: `simple` in JavaScript, so what it measures is the path, not a runtime.
  models.set(FLOOR_MODEL, sumAndDifference(FLOOR_MODEL, 'INT32', [-1, 16], 8))
  // node:cluster workers share a port, not a socket path: the sockets are a single process's.
  const socketDirectory = workers > 1 ? undefined : process.env.BENCH_SOCKET_DIR
  const app = await buildServer({
    models,
    fastify: { logger: false },
    jsonLimit: 512 * 1024 ** 2,
    // The JSON baseline's requests at 16 MiB per tensor are charged about 2 GiB each (their text,
    // and 12 times it for the parsed values): two in flight need more than the default budget.
    maxInFlightBytes: 8 * 1024 ** 3,
    grpcPort: 0,
    ...(socketDirectory !== undefined && { grpcSocket: path.join(socketDirectory, 'grpc.sock') }),
    sharedRegistry: storePath === undefined ? undefined : { path: storePath },
    processStatistics: process.env.BENCH_PROCESS_STATISTICS === '1',
    // Tracing off (Triton's default level) until a suite turns it on.
    ...(process.env.BENCH_TRACE_FILE !== undefined && { trace: { file: process.env.BENCH_TRACE_FILE } })
  })
  let barePayload = Buffer.from('[]')
  // The baseline: no hooks, no schema, no serializer; the bytes are fixed by the parent (a Buffer,
  // so Fastify adds no charset to the Content-Type, as the status route's hook adds none).
  app.get('/bench/bare', (_request, reply) => { reply.header('content-type', 'application/json').send(barePayload) })
  app.get('/bench/rss', async () => stats())
  await handInferRoute(app, models)
  await floorRoutes(app, models, () => barePayload)

  const send = (message: ChildMessage) => process.send?.(message)
  const stop = () => { app.close().finally(() => process.exit(0)) }
  process.on('message', (message: ParentMessage) => {
    if (message.type === 'bare') {
      barePayload = Buffer.from(message.payload)
      send({ type: 'bare-set' })
    } else if (message.type === 'scavenge') {
      send({ type: 'scavenged', newSpaceBytes: scavenged() })
    } else if (message.type === 'stop') {
      stop()
    }
  })
  // An orphan must not outlive the bench: the IPC channel closes when the parent exits (a
  // worker's, with its primary, which stops it with SIGTERM).
  process.on('disconnect', stop)
  process.on('SIGTERM', stop)
  process.on('SIGINT', stop)
  const floor = await startTransportFloor()
  app.addHook('onClose', async () => floor.close())
  await app.listen({ host: '127.0.0.1', port: 0 })
  if (socketDirectory !== undefined) await listenBeside(app, path.join(socketDirectory, 'http.sock'))
  const address = app.server.address()
  if (address === null || typeof address === 'string') throw new Error('no TCP address')
  send({ type: 'listening', port: address.port, grpcPort: app.tritonGrpc.port as number, floor: { httpPort: floor.httpPort, grpcPort: floor.grpcPort, ownGrpcPort: floor.ownGrpcPort } })
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
