/**
 * `npm run example`: starts the example service on a free port, runs the example client against it
 * over real HTTP, prints what happened, shuts the service down, and exits 0 only if every result
 * was checked correct.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { once } from 'node:events'
import path from 'node:path'
import { createInterface } from 'node:readline'
import { runClient } from './client'

const LISTENING = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/

/** The plugin's line once its gRPC listener is bound. */
const GRPC_LISTENING = 'KServe gRPC listening'

interface LogLine { msg?: string, region?: string, key?: string, byteSize?: number, port?: number }

function describe ({ msg, region, key, byteSize }: LogLine): string {
  const details = [region && `region=${region}`, key && `key=${key}`, byteSize && `bytes=${byteSize}`].filter(Boolean)
  return `  [server] ${msg}${details.length > 0 ? ` (${details.join(', ')})` : ''}`
}

/** Starts the service and resolves with its addresses once it listens (HTTP and gRPC); echoes its log lines. */
function startServer (): Promise<{ server: ChildProcess, address: string, grpcAddress: string }> {
  const server = spawn(process.execPath, ['--import', 'tsx', path.join(__dirname, 'server.ts')], {
    env: { ...process.env, HOST: '127.0.0.1', PORT: '0', GRPC_PORT: '0' },
    stdio: ['ignore', 'pipe', 'inherit']
  })
  return new Promise((resolve, reject) => {
    server.once('exit', (code) => reject(new Error(`the service exited with code ${code} before listening`)))
    let grpcAddress: string | undefined
    createInterface({ input: server.stdout! }).on('line', (line) => {
      const log = JSON.parse(line) as LogLine
      // The gRPC listener is bound when the app is ready, before the HTTP server listens.
      if (log.msg === GRPC_LISTENING) grpcAddress = `127.0.0.1:${log.port}`
      const listening = LISTENING.exec(log.msg ?? '')
      if (listening !== null) resolve({ server, address: listening[1], grpcAddress: grpcAddress as string })
      // The shared memory registry's own lines; per-request access logs would drown them.
      if (log.region !== undefined) console.log(describe(log))
    })
  })
}

async function main (): Promise<boolean> {
  const started = process.hrtime.bigint()
  const { server, address, grpcAddress } = await startServer()
  try {
    console.log(`service listening at ${address}, and over gRPC at ${grpcAddress}\n`)
    // KEY_SUFFIX keeps runs in parallel (a test beside a developer's run) off each other's objects.
    const { ok } = await runClient(address, { log: (line) => console.log(line), keySuffix: process.env.KEY_SUFFIX, grpcAddress })
    return ok
  } finally {
    server.removeAllListeners('exit')
    const exited = once(server, 'exit')
    server.kill('SIGTERM')
    await exited
    console.log(`\nservice stopped; ${(Number(process.hrtime.bigint() - started) / 1e9).toFixed(2)} s in all`)
  }
}

main().then((ok) => {
  console.log(ok ? 'PASS: every result checked correct' : 'FAIL: some results were wrong')
  process.exitCode = ok ? 0 : 1
}, (error) => {
  console.error(error)
  process.exitCode = 1
})
