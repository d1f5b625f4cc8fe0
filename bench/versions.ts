/**
 * This checkout against an earlier revision: the example service of each, side by side, and the
 * server CPU each spends per `simple` infer over shared memory (INT32 [1, 16], inputs and outputs
 * in regions), in alternating rounds, the order turned each round. What a change costs every
 * request while nobody uses it: a new extension left at its defaults (`versionCpuRatio`, this
 * checkout / the revision).
 *
 *   npx tsx bench/versions.ts <revision> [--quick] [--grpc]
 *
 * The revision is checked out into a temporary git worktree, its native addon built there with
 * node-gyp (the Node headers of this Node, no download), its example server compiled to plain
 * JavaScript as the bench's own is (bench/server-build.ts), on this checkout's node_modules. Each
 * server runs as `npm run example:server` runs it, logging warnings only, on HTTP alone; with
 * `--grpc`, its gRPC listener too, and the load is unary ModelInfer calls from lean node:http2
 * clients (bench/lean-clients.ts), one per connection (the regions registered over HTTP).
 */
import { type ChildProcess, spawn } from 'node:child_process'
import net from 'node:net'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { KServeClient } from '../lib/index'
import { num, progress, ratio, table } from './format'
import { type LeanClient, modelInferClient } from './lean-clients'
import { runLoad } from './load'
import { processTreeCpuMicros } from './process-tree-cpu'
import { checkout } from './revision-checkout'
import { buildServer } from './server-build'
import { grpcRegion, jsonRegion, SimpleShm } from './simple-shm'

const ROOT = path.join(__dirname, '..')
const CONNECTIONS = 4
const READY_TIMEOUT_MS = 60_000

interface Version { label: string, server: ChildProcess, url: string, grpcAddress?: string }

async function freePort (): Promise<number> {
  const server = net.createServer().listen(0, '127.0.0.1')
  await new Promise((resolve) => server.once('listening', resolve))
  const { port } = server.address() as net.AddressInfo
  await new Promise((resolve) => server.close(resolve))
  return port
}

/** Starts the example server compiled from `root` (with its gRPC listener for `grpc`); resolves
 * once it answers ready. */
async function start (label: string, root: string, grpc: boolean): Promise<Version> {
  const port = await freePort()
  const grpcPort = grpc ? await freePort() : undefined
  const grpcFlag = grpcPort === undefined ? '--allow-grpc=false' : `--grpc-port=${grpcPort}`
  const server = spawn(process.execPath, [buildServer('example/server.ts', root), `--http-port=${port}`, grpcFlag], {
    env: { ...process.env, NODE_ENV: 'production', LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'inherit', 'inherit']
  })
  process.on('exit', () => server.kill('SIGKILL'))
  const url = `http://127.0.0.1:${port}`
  const deadline = Date.now() + READY_TIMEOUT_MS
  while ((await fetch(`${url}/v2/health/ready`).then((answer) => answer.ok, () => false)) === false) {
    if (server.exitCode !== null || Date.now() > deadline) throw new Error(`${label}: the example server did not start`)
    await sleep(100)
  }
  return { label, server, url, ...(grpcPort !== undefined && { grpcAddress: `127.0.0.1:${grpcPort}` }) }
}

/** `connections` lean clients, each sending its next call when its last is answered, for `seconds`. */
async function unaryLoad (clients: LeanClient[], seconds: number): Promise<number> {
  const end = Date.now() + seconds * 1000
  let completed = 0
  await Promise.all(clients.map(async (client) => {
    while (Date.now() < end) {
      await client.send()
      completed++
    }
  }))
  return completed
}

async function measure (revision: string, rounds: number, secondsPerRun: number, grpc: boolean): Promise<void> {
  progress(`checking out ${revision} and building its addon and example server`)
  const versions = [await start('this checkout', ROOT, grpc), await start(revision, checkout(revision), grpc)]
  const simple = new SimpleShm('versions')
  const load = { method: 'POST' as const, path: '/v2/models/simple/infer', headers: { 'content-type': 'application/json' }, body: JSON.stringify(simple.wire(jsonRegion)) }
  const unaryClients = new Map<Version, LeanClient[]>()
  try {
    for (const version of versions) {
      const client = new KServeClient(version.url)
      await simple.register(client)
      await client.infer('simple', JSON.parse(load.body))
      if (!simple.answered()) throw new Error(`${version.label}: wrong outputs`)
      if (version.grpcAddress === undefined) continue
      const clients = Array.from({ length: CONNECTIONS }, () =>
        modelInferClient({ address: version.grpcAddress as string }, { model_name: 'simple', ...simple.wire(grpcRegion) }))
      unaryClients.set(version, clients)
      await clients[0].send()
    }
    const run = async (version: Version, seconds: number) => {
      const before = processTreeCpuMicros(version.server.pid as number)
      const clients = unaryClients.get(version)
      const completed = clients === undefined
        ? (await runLoad({ url: version.url, requests: [load], connections: CONNECTIONS, durationSeconds: seconds })).completed
        : await unaryLoad(clients, seconds)
      return { requests: completed, cpuMicros: processTreeCpuMicros(version.server.pid as number) - before }
    }
    for (const version of [...versions, ...versions]) await run(version, 1)
    const totals = versions.map(() => ({ requests: 0, cpuMicros: 0 }))
    for (let round = 0; round < rounds; round++) {
      for (const index of round % 2 === 0 ? [0, 1] : [1, 0]) {
        const { requests, cpuMicros } = await run(versions[index], secondsPerRun)
        totals[index].requests += requests
        totals[index].cpuMicros += cpuMicros
      }
      progress(`round ${round + 1}/${rounds}: ` + versions.map(({ label }, index) => `${label} ${num(totals[index].cpuMicros / totals[index].requests)} µs/req`).join(', '))
    }
    const perRequest = totals.map(({ requests, cpuMicros }) => cpuMicros / requests)
    const transport = grpc ? 'unary ModelInfer' : 'HTTP'
    process.stdout.write(table(`Server CPU per request, simple over shared memory, ${transport}, ${CONNECTIONS} connections, the example service`,
      ['version', 'CPU/req', 'requests'], versions.map(({ label }, index) => [label, `${num(perRequest[index])} µs`, num(totals[index].requests)]),
      [`versionCpuRatio (this checkout / ${revision}): ${ratio(perRequest[0] / perRequest[1])}`,
        `${rounds} rounds of ${secondsPerRun} s per version, the order turned each round.`]) + '\n')
    process.stdout.write(JSON.stringify({ versionCpuRatio: perRequest[0] / perRequest[1] }) + '\n')
  } finally {
    for (const clients of unaryClients.values()) for (const client of clients) client.close()
    for (const { server } of versions) server.kill()
    simple.dispose()
  }
}

const args = process.argv.slice(2)
const revision = args.find((arg) => !arg.startsWith('--'))
if (revision === undefined) {
  process.stderr.write('usage: npx tsx bench/versions.ts <revision> [--quick] [--grpc]\n')
  process.exit(2)
}
const quick = args.includes('--quick')
measure(revision, quick ? 2 : 10, quick ? 1.5 : 3, args.includes('--grpc')).then(() => process.exit(0), (error: unknown) => {
  process.stderr.write(`bench failed: ${(error as Error).stack ?? String(error)}\n`)
  process.exit(1)
})
