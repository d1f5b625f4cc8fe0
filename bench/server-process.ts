/**
 * The bench server (bench/server.ts) as a child process of the runner: the load generator and the
 * server never share a process. Killed when the runner exits, however it exits.
 */
import { type ChildProcess, fork } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import type { ChildMessage, ParentMessage, ServerStats } from './server-protocol'
import { buildServer } from './server-build'

const START_TIMEOUT_MS = 30_000
const STOP_TIMEOUT_MS = 10_000

const running = new Set<ChildProcess>()
process.on('exit', () => { for (const child of running) child.kill('SIGKILL') })

export interface ServerProcessOptions {
  /** Directory for `node --cpu-prof` profiles of the server, when profiling. */
  cpuProfileDir?: string
  /** Gives the server a shared registry (`sharedRegistry`) with its store at this path. */
  sharedRegistryPath?: string
  /** With a shared registry, its model table counts statistics in its process only (`processStatistics`). */
  processStatistics?: boolean
  /** Runs the server as this many node:cluster workers on one port (`WORKERS`), sharing one registry. */
  workers?: number
  /** More of Node's and V8's flags for the server (`--expose-gc`, a heap's sizes). */
  nodeFlags?: string[]
}

let serverFile: string | undefined

export class ServerProcess {
  /** `grpcAddress`: the server's gRPC listener, `127.0.0.1:<port>`; `httpSocket` and `grpcSocket`:
   * the same services' Unix sockets, in a directory of the server's own; `floor`: the addresses
   * (`127.0.0.1:<port>`) of the transports' own floor (bench/transport-floor.ts). */
  private constructor (readonly child: ChildProcess, readonly url: string, readonly grpcAddress: string,
    readonly httpSocket: string, readonly grpcSocket: string, readonly floor: { http: string, grpc: string, ownGrpc: string }) {}

  static async start (options: ServerProcessOptions = {}): Promise<ServerProcess> {
    const profile = options.cpuProfileDir === undefined ? [] : ['--cpu-prof', `--cpu-prof-dir=${options.cpuProfileDir}`]
    serverFile ??= buildServer()
    const socketDirectory = mkdtempSync(path.join(os.tmpdir(), 'fastify-triton-shm-bench-sockets-'))
    const child = fork(serverFile, [], {
      // A heap to hold what the budget lets the JSON baseline's requests in flight hold (bench/server.ts).
      execArgv: ['--max-old-space-size=8192', ...profile, ...options.nodeFlags ?? []],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      env: {
        ...process.env,
        NODE_ENV: 'production',
        BENCH_SOCKET_DIR: socketDirectory,
        // Where its traces go when a suite turns tracing on (each worker's beside it, `.pid<pid>`).
        BENCH_TRACE_FILE: path.join(socketDirectory, 'traces.json'),
        ...(options.sharedRegistryPath === undefined ? {} : { BENCH_SHARED_REGISTRY_PATH: options.sharedRegistryPath }),
        ...(options.processStatistics === true && { BENCH_PROCESS_STATISTICS: '1' }),
        ...(options.workers !== undefined && { BENCH_WORKERS: String(options.workers) })
      }
    })
    running.add(child)
    child.once('exit', () => {
      running.delete(child)
      rmSync(socketDirectory, { recursive: true, force: true })
    })
    try {
      const { port, grpcPort, floor } = await waitFor(child, 'listening', START_TIMEOUT_MS)
      return new ServerProcess(child, `http://127.0.0.1:${port}`, `127.0.0.1:${grpcPort}`,
        path.join(socketDirectory, 'http.sock'), path.join(socketDirectory, 'grpc.sock'),
        { http: `127.0.0.1:${floor.httpPort}`, grpc: `127.0.0.1:${floor.grpcPort}`, ownGrpc: `127.0.0.1:${floor.ownGrpcPort}` })
    } catch (error) {
      child.kill('SIGKILL')
      throw error
    }
  }

  get pid (): number {
    return this.child.pid as number
  }

  /** Sets the bytes the bare route answers. */
  async setBarePayload (payload: string): Promise<void> {
    this.#send({ type: 'bare', payload })
    await waitFor(this.child, 'bare-set', START_TIMEOUT_MS)
  }

  /** Runs one scavenge in the server (started with `--expose-gc`); resolves with its new space's
   * bytes in use after it: what survived it for the first time. */
  async scavenge (): Promise<number> {
    this.#send({ type: 'scavenge' })
    const { newSpaceBytes } = await waitFor(this.child, 'scavenged', START_TIMEOUT_MS)
    if (newSpaceBytes === null) throw new Error('the bench server runs without --expose-gc')
    return newSpaceBytes
  }

  async stats (): Promise<ServerStats> {
    const response = await fetch(`${this.url}/bench/rss`)
    if (!response.ok) throw new Error(`GET /bench/rss: ${response.status}`)
    return await response.json() as ServerStats
  }

  /** Asks the server to close (so a CPU profile is written), and kills it if it does not. */
  async stop (): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return
    const exited = new Promise<void>((resolve) => this.child.once('exit', () => resolve()))
    this.#send({ type: 'stop' })
    const timer = setTimeout(() => this.child.kill('SIGKILL'), STOP_TIMEOUT_MS)
    await exited
    clearTimeout(timer)
  }

  #send (message: ParentMessage): void {
    this.child.send(message)
  }
}

type MessageOf<Type extends ChildMessage['type']> = Extract<ChildMessage, { type: Type }>

function waitFor<Type extends ChildMessage['type']> (child: ChildProcess, type: Type, timeoutMs: number): Promise<MessageOf<Type>> {
  return new Promise((resolve, reject) => {
    const cleanup = () => {
      clearTimeout(timer)
      child.off('message', onMessage)
      child.off('exit', onExit)
    }
    const onMessage = (message: ChildMessage) => {
      if (message.type !== type) return
      cleanup()
      resolve(message as MessageOf<Type>)
    }
    const onExit = (code: number | null, signal: string | null) => {
      cleanup()
      reject(new Error(`bench server exited (code ${code}, signal ${signal}) before '${type}'`))
    }
    const timer = setTimeout(() => {
      cleanup()
      reject(new Error(`bench server sent no '${type}' within ${timeoutMs} ms`))
    }, timeoutMs)
    child.on('message', onMessage)
    child.once('exit', onExit)
  })
}
