/**
 * This checkout against an earlier revision: the example service of each, side by side, and the
 * server CPU each spends per `simple` infer over shared memory (INT32 [1, 16], inputs and outputs
 * in regions), in alternating rounds, the order turned each round. What a change costs every
 * request while nobody uses it: a new extension left at its defaults (`versionCpuRatio`, this
 * checkout / the revision).
 *
 *   npx tsx bench/versions.ts <revision> [--quick]
 *
 * The revision is checked out into a temporary git worktree, its native addon built there with
 * node-gyp (the Node headers of this Node, no download), its example server compiled to plain
 * JavaScript as the bench's own is (bench/server-build.ts), on this checkout's node_modules. Each
 * server runs as `npm run example:server` runs it, on HTTP alone, logging warnings only.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { KServeClient } from '../lib/index'
import { num, progress, ratio, table } from './format'
import { runLoad } from './load'
import { processTreeCpuMicros } from './process-tree-cpu'
import { buildServer } from './server-build'
import { jsonRegion, SimpleShm } from './simple-shm'

const ROOT = path.join(__dirname, '..')
const CONNECTIONS = 4
const READY_TIMEOUT_MS = 60_000

interface Version { label: string, server: ChildProcess, url: string }

/** A checkout of `revision` in a temporary worktree, its addon built; removed at exit. */
function checkout (revision: string): string {
  const directory = mkdtempSync(path.join(os.tmpdir(), 'fastify-triton-shm-version-'))
  execFileSync('git', ['-C', ROOT, 'worktree', 'add', '--detach', directory, revision], { stdio: 'ignore' })
  process.on('exit', () => {
    try {
      execFileSync('git', ['-C', ROOT, 'worktree', 'remove', '--force', directory], { stdio: 'ignore' })
    } finally {
      rmSync(directory, { recursive: true, force: true })
    }
  })
  const nodedir = process.env.npm_config_nodedir ?? path.resolve(process.execPath, '../..')
  execFileSync(process.execPath, [require.resolve('node-gyp/bin/node-gyp.js'), 'rebuild', `--nodedir=${nodedir}`],
    { cwd: directory, stdio: ['ignore', 'ignore', 'pipe'] })
  return directory
}

async function freePort (): Promise<number> {
  const server = net.createServer().listen(0, '127.0.0.1')
  await new Promise((resolve) => server.once('listening', resolve))
  const { port } = server.address() as net.AddressInfo
  await new Promise((resolve) => server.close(resolve))
  return port
}

/** Starts the example server compiled from `root`; resolves once it answers ready. */
async function start (label: string, root: string): Promise<Version> {
  const port = await freePort()
  const server = spawn(process.execPath, [buildServer('example/server.ts', root), `--http-port=${port}`, '--allow-grpc=false'], {
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
  return { label, server, url }
}

async function measure (revision: string, rounds: number, secondsPerRun: number): Promise<void> {
  progress(`checking out ${revision} and building its addon and example server`)
  const versions = [await start('this checkout', ROOT), await start(revision, checkout(revision))]
  const simple = new SimpleShm('versions')
  const load = { method: 'POST' as const, path: '/v2/models/simple/infer', headers: { 'content-type': 'application/json' }, body: JSON.stringify(simple.wire(jsonRegion)) }
  try {
    for (const { label, url } of versions) {
      const client = new KServeClient(url)
      await simple.register(client)
      await client.infer('simple', JSON.parse(load.body))
      if (!simple.answered()) throw new Error(`${label}: wrong outputs`)
    }
    const run = async ({ server, url }: Version, seconds: number) => {
      const before = processTreeCpuMicros(server.pid as number)
      const { completed } = await runLoad({ url, requests: [load], connections: CONNECTIONS, durationSeconds: seconds })
      return { requests: completed, cpuMicros: processTreeCpuMicros(server.pid as number) - before }
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
    process.stdout.write(table(`Server CPU per request, simple over shared memory, ${CONNECTIONS} connections, the example service`,
      ['version', 'CPU/req', 'requests'], versions.map(({ label }, index) => [label, `${num(perRequest[index])} µs`, num(totals[index].requests)]),
      [`versionCpuRatio (this checkout / ${revision}): ${ratio(perRequest[0] / perRequest[1])}`,
        `${rounds} rounds of ${secondsPerRun} s per version, the order turned each round.`]) + '\n')
    process.stdout.write(JSON.stringify({ versionCpuRatio: perRequest[0] / perRequest[1] }) + '\n')
  } finally {
    for (const { server } of versions) server.kill()
    simple.dispose()
  }
}

const args = process.argv.slice(2)
const revision = args.find((arg) => !arg.startsWith('--'))
if (revision === undefined) {
  process.stderr.write('usage: npx tsx bench/versions.ts <revision> [--quick]\n')
  process.exit(2)
}
const quick = args.includes('--quick')
measure(revision, quick ? 2 : 10, quick ? 1.5 : 3).then(() => process.exit(0), (error: unknown) => {
  process.stderr.write(`bench failed: ${(error as Error).stack ?? String(error)}\n`)
  process.exit(1)
})
