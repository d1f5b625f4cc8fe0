/**
 * What the process holds and says, observed from outside the code under test: file descriptors
 * open on shared memory objects (/proc/self/fd), resident memory (/proc/self/status), and the log
 * lines a real pino logger writes (Fastify's, or the registry's through `new Registry({ logger })`).
 */
import { EventEmitter } from 'node:events'
import { readdirSync, readFileSync, readlinkSync } from 'node:fs'
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import Fastify from 'fastify'
import type { RegistryLogger } from '../../types'
import { objectPath } from './shm'

/** The registry's messages (lib/registry.ts). */
export const REGISTERED = 'registered system shared memory region'
export const UNREGISTERED = 'unregistered system shared memory region'
export const DEFERRED = 'system shared memory region will be unregistered when its last lease ends'
export const REFUSED = 'refused to register system shared memory region'
export const NOT_IN_THIS_SHM = "system shared memory object does not exist in this server's /dev/shm: most likely the client " +
  'and the server do not share /dev/shm (separate containers without --ipc=host or --ipc=container:<name>, ' +
  'Kubernetes containers without one memory-backed emptyDir mounted at /dev/shm, or another pod or host)'

/** pino's numeric levels. */
export const LEVEL = { trace: 10, debug: 20, info: 30, warn: 40, error: 50, fatal: 60 } as const

/** Targets of this process's open descriptors that are shared memory objects. */
export function shmFdTargets (): string[] {
  const targets: string[] = []
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      const target = readlinkSync(`/proc/self/fd/${fd}`)
      if (target.startsWith('/dev/shm/')) targets.push(target)
    } catch {
      // The descriptor that listed the directory is closed by now.
    }
  }
  return targets
}

/** Open descriptors on `key`'s object (also once it is unlinked). */
export const fdsOf = (key: string): number =>
  shmFdTargets().filter((target) => target === objectPath(key) || target === `${objectPath(key)} (deleted)`).length

/** A size line of /proc/self/status (`VmRSS`, `RssShmem`...), in bytes. */
function statusBytes (field: string): number {
  const match = new RegExp(`^${field}:\\s+(\\d+) kB$`, 'm').exec(readFileSync('/proc/self/status', 'utf8'))
  if (match === null) throw new Error(`no ${field} in /proc/self/status`)
  return Number(match[1]) * 1024
}

/** Resident memory of this process (VmRSS), in bytes. */
export const residentBytes = (): number => statusBytes('VmRSS')

/** Resident pages of shared memory mapped by this process (RssShmem), in bytes. */
export const residentSharedBytes = (): number => statusBytes('RssShmem')

/**
 * A full garbage collection, now (V8's `gc()`, exposed without a command-line flag): what is
 * unreachable is freed, and finalizers are due.
 */
export function collectGarbage (): void {
  setFlagsFromString('--expose-gc')
  ;(runInNewContext('gc') as () => void)()
}

/** One JSON line of pino. */
export interface LogLine {
  level: number
  msg: string
  reqId?: string
  [field: string]: unknown
}

/**
 * A destination for pino that keeps every line, in the order written (pino writes synchronously,
 * so the order is the order in which the code logged).
 */
/** Every line a logger wrote, and a `line` event for each, for tests that wait for one. */
export class LogCapture extends EventEmitter {
  readonly text: string[] = []
  readonly lines: LogLine[] = []
  readonly stream = {
    write: (line: string) => {
      this.text.push(line)
      this.lines.push(JSON.parse(line) as LogLine)
      this.emit('line')
    }
  }

  /** A real pino logger writing here (Fastify's own, pino is not a dependency of its own), for
   * `new Registry({ logger })`. */
  logger (level = 'debug'): RegistryLogger {
    return Fastify({ logger: { level, stream: this.stream } }).log
  }

  withMessage (message: string): LogLine[] {
    return this.lines.filter((line) => line.msg === message)
  }

  clear (): void {
    this.text.length = 0
    this.lines.length = 0
  }
}
