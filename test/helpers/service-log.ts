/**
 * The JSON lines a service process (the example, one primary and its workers) logs, collected as
 * they come, so a test waits for what the service says, never for time.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { EventEmitter } from 'node:events'
import path from 'node:path'
import { createInterface } from 'node:readline'
import type { Test } from 'tap'
import { killGroup } from './process-group'
import { PATIENCE_MS, whenEvent } from './sync'

/** The example service's script (`npm run example:server`). */
const EXAMPLE_SERVER = path.join(__dirname, '..', '..', 'example', 'server.ts')

/** Starts the example service with Node's `nodeArgs` and tritonserver's options `args`, in a
 * test's environment: ports the system picks, JSON logs, and no coverage (tap would merge the
 * numbers of its tsx-compiled code with the test's), then `env` (a variable given as undefined is unset). */
export function spawnExample (env: Record<string, string | undefined>, { nodeArgs = [], args = [], detached = false }:
{ nodeArgs?: string[], args?: string[], detached?: boolean } = {}): ChildProcess {
  return spawn(process.execPath, [...nodeArgs, '--import', 'tsx', EXAMPLE_SERVER, ...args], {
    env: { ...process.env, HOST: '127.0.0.1', PORT: '0', GRPC_PORT: '0', LOG_LEVEL: 'info', _TAPJS_PROCESSINFO_COVERAGE_: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached
  })
}

/** Starts the example service as its own process group, killed whole on teardown: the primary
 * and every worker it started. */
export function spawnServiceGroup (t: Test, env: Record<string, string>, args: string[] = []): ChildProcess {
  const child = spawnExample(env, { args, detached: true })
  t.teardown(() => killGroup(child.pid!))
  return child
}

export interface LogLine {
  pid: number
  msg: string
  port?: number
  req?: { url: string, remotePort?: number }
  workerPid?: number
  code?: number | null
  signal?: string | null
  store?: string
}

/** The service's process tree, and the JSON lines it logged so far. */
export class ServiceLog extends EventEmitter {
  readonly lines: LogLine[] = []
  /** stderr, and stdout lines that are not JSON: shown when an assertion fails. */
  other = ''
  #exited = false

  constructor (readonly child: ChildProcess) {
    super()
    createInterface({ input: child.stdout! }).on('line', (line) => {
      try {
        this.lines.push(JSON.parse(line) as LogLine)
      } catch {
        this.other += line + '\n'
      }
      this.emit('line')
    })
    child.stderr!.on('data', (chunk: Buffer) => {
      this.other += chunk.toString()
      this.emit('line')
    })
    child.once('exit', () => {
      this.#exited = true
      this.emit('line')
    })
  }

  /** Resolves with the logged lines that `select` picks, once there are `count` of them; rejects
   * at once if the service exits first, with what it printed. */
  async until (select: (line: LogLine) => boolean, what: string, count = 1, ms = PATIENCE_MS): Promise<LogLine[]> {
    const enough = () => this.lines.filter(select).length >= count
    await whenEvent(this, 'line', () => enough() || this.#exited, `${what}\n${this.other}`, ms)
    if (!enough()) throw new Error(`${what}: the service exited\n${this.other}`)
    return this.lines.filter(select)
  }

  /** Resolves once what the service printed besides its JSON lines (its stderr: a worker's too,
   * a pipe apart from the primary's log) matches `pattern`. */
  async untilPrinted (pattern: RegExp, what: string, ms = PATIENCE_MS): Promise<void> {
    await whenEvent(this, 'line', () => pattern.test(this.other) || this.#exited, `${what}\n${this.other}`, ms)
    if (!pattern.test(this.other)) throw new Error(`${what}: the service exited\n${this.other}`)
  }
}
