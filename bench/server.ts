/**
 * The bench's server child: the example service (plugin, /v2 routes, infer route), plus
 *   GET /bench/bare  a bare Fastify route answering fixed JSON bytes (the route suite's baseline),
 *   GET /bench/rss   this process's memory and CPU time (peak RSS is reported from it),
 *   POST /bench/hand/models/<m>/infer  a hand-written infer route (the model table suite's baseline),
 * and KServe over gRPC on a port of its own.
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
import type { FastifyReply, FastifyRequest } from 'fastify'
import { runPrimary, workerCount } from '../example/cluster'
import { loadModels, run } from '../example/models'
import { buildServer } from '../example/server'
import { inferResponse, kserveErrorHandler, readInferRequest, useInferBodyParser } from '../lib/index'
import { type ChildMessage, HAND_INFER_ROUTE, type ParentMessage, type ServerStats } from './server-protocol'

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

async function main () {
  const workers = workerCount(process.env.BENCH_WORKERS)
  if (workers > 1 && cluster.isPrimary) return runBenchPrimary(workers)
  // JSON `data` is one of the transports measured: its parts may be as large as V8's strings allow.
  const storePath = process.env.BENCH_SHARED_REGISTRY_PATH ?? process.env.SHARED_REGISTRY_PATH
  const models = await loadModels()
  const app = await buildServer({
    models,
    fastify: { logger: false },
    jsonLimit: 512 * 1024 ** 2,
    // The JSON baseline's requests at 16 MiB per tensor are charged about 2 GiB each (their text,
    // and 12 times it for the parsed values): two in flight need more than the default budget.
    maxInFlightBytes: 8 * 1024 ** 3,
    grpcPort: 0,
    sharedRegistry: storePath === undefined ? undefined : { path: storePath },
    processStatistics: process.env.BENCH_PROCESS_STATISTICS === '1'
  })
  let barePayload = Buffer.from('[]')
  // The baseline: no hooks, no schema, no serializer; the bytes are fixed by the parent (a Buffer,
  // so Fastify adds no charset to the Content-Type, as the status route's hook adds none).
  app.get('/bench/bare', (_request, reply) => { reply.header('content-type', 'application/json').send(barePayload) })
  app.get('/bench/rss', async () => stats())
  // The model table's infer route without the table: the same path parameter, reading, run and response.
  await app.register(async (hand) => {
    useInferBodyParser(hand, { bodyLimit: 1024 ** 3 })
    hand.setErrorHandler(kserveErrorHandler)
    hand.post(HAND_INFER_ROUTE, async (request: FastifyRequest<{ Params: { model: string } }>, reply: FastifyReply) => {
      const model = models.get(request.params.model)
      if (model === undefined) return reply.code(404).send({ error: 'unknown model' })
      // The version the table would name: the example's models have one.
      const infer = readInferRequest(request, reply, { registry: app.systemSharedMemory, model: model.signature, modelVersion: model.signature.versions?.[0] })
      await run(model, infer, 0)
      return inferResponse(infer, reply)
    })
  })

  const send = (message: ChildMessage) => process.send?.(message)
  const stop = () => { app.close().finally(() => process.exit(0)) }
  process.on('message', (message: ParentMessage) => {
    if (message.type === 'bare') {
      barePayload = Buffer.from(message.payload)
      send({ type: 'bare-set' })
    } else if (message.type === 'stop') {
      stop()
    }
  })
  // An orphan must not outlive the bench: the IPC channel closes when the parent exits (a
  // worker's, with its primary, which stops it with SIGTERM).
  process.on('disconnect', stop)
  process.on('SIGTERM', stop)
  process.on('SIGINT', stop)
  await app.listen({ host: '127.0.0.1', port: 0 })
  const address = app.server.address()
  if (address === null || typeof address === 'string') throw new Error('no TCP address')
  send({ type: 'listening', port: address.port, grpcPort: app.tritonGrpc.port as number })
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
