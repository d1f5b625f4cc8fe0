/**
 * The example service (example/server.ts) in a child process of its own, with a small V8 heap:
 * where a request could exhaust the heap, it is the child that dies, never the test. Its JSON log
 * lines say where it listens; /proc says how much memory it took at its peak.
 */
import type { ChildProcess } from 'node:child_process'
import { EventEmitter, once } from 'node:events'
import { readFileSync } from 'node:fs'
import { createInterface } from 'node:readline'
import type { Test } from 'tap'
import { spawnExample } from './service-log'
import { PATIENCE_MS, whenEvent } from './sync'

interface LogLine { msg: string, port?: number }

export class ServiceProcess extends EventEmitter {
  readonly lines: LogLine[] = []
  /** stderr and lines that are not JSON: what a dying process says ("heap out of memory"). */
  other = ''
  /** Set once the process has exited: its code, or the signal that ended it. */
  exit?: string
  readonly exited: Promise<unknown>

  constructor (readonly child: ChildProcess) {
    super()
    const collect = (line: string) => {
      try {
        this.lines.push(JSON.parse(line) as LogLine)
      } catch {
        this.other += line + '\n'
      }
      this.emit('line')
    }
    createInterface({ input: child.stdout! }).on('line', collect)
    createInterface({ input: child.stderr! }).on('line', collect)
    this.exited = once(child, 'exit').then(([code, signal]) => {
      this.exit = signal ?? `code ${code}`
      this.emit('line')
    })
  }

  /** The gRPC listener's port, once it listens. */
  async grpcPort (): Promise<number> {
    await whenEvent(this, 'line', () => this.lines.some((line) => line.msg === 'KServe gRPC listening') || this.exit !== undefined,
      `the service never listened for gRPC\n${this.other}`, 5 * PATIENCE_MS)
    const line = this.lines.find((line) => line.msg === 'KServe gRPC listening')
    if (line === undefined) throw new Error(`the service exited (${this.exit}) before it listened\n${this.other}`)
    return line.port as number
  }

  /** The HTTP base URL, once it listens. */
  async baseUrl (): Promise<string> {
    const listening = (line: LogLine) => /^Server listening at http:\/\/127\.0\.0\.1:\d+$/.test(line.msg)
    await whenEvent(this, 'line', () => this.lines.some(listening) || this.exit !== undefined,
      `the service never listened for HTTP\n${this.other}`, 5 * PATIENCE_MS)
    const line = this.lines.find(listening)
    if (line === undefined) throw new Error(`the service exited (${this.exit}) before it listened\n${this.other}`)
    return line.msg.slice('Server listening at '.length)
  }

  /** The largest resident set the process has had (VmHWM), in bytes; NaN once it has exited. */
  peakRss (): number {
    const status = this.alive ? readFileSync(`/proc/${this.child.pid}/status`, 'utf8') : ''
    return Number(/^VmHWM:\s+(\d+) kB$/m.exec(status)?.[1] ?? NaN) * 1024
  }

  /** What became of the process after a call that got no status: it lives, or how it died. */
  async fate (): Promise<string> {
    await Promise.race([this.exited, new Promise((resolve) => setTimeout(resolve, 10_000).unref())])
    return this.alive ? 'the service lives' : `the service died (${this.exit}): ${this.other.slice(-300)}`
  }

  get alive (): boolean {
    return this.exit === undefined
  }
}

/** Starts the example service on ports the system picks, with a V8 heap of `heapMiB` and
 * tritonserver's options `args`; killed on teardown. */
export function startServiceProcess (t: Test, heapMiB: number, env: Record<string, string | undefined> = {}, args: string[] = []): ServiceProcess {
  const child = spawnExample(env, { nodeArgs: [`--max-old-space-size=${heapMiB}`], args })
  const service = new ServiceProcess(child)
  t.teardown(async () => {
    if (!service.alive) return
    child.kill('SIGKILL')
    await service.exited
  })
  return service
}
