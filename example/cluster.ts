/**
 * The example service on several processes: `WORKERS=4 npm run example:server` runs it as four
 * node:cluster workers on one port, sharing one registry (the plugin's `sharedRegistry` option),
 * so a client may register on one connection and infer on another, whichever worker each reaches.
 *
 * The primary serves nothing itself, and holds no connection: the workers accept their own
 * (SCHED_NONE, see runPrimary), so a crash costs the requests in flight and no later one. It makes
 * a private directory for the registry's store, starts the workers with its path in
 * SHARED_REGISTRY_PATH, starts another worker when one dies, and on
 * SIGINT or SIGTERM (to it alone, or to the whole process group) stops the workers, then removes
 * the directory. A worker that dies before it listened is started again after a delay that doubles
 * at each such death in a row; the service stops only when a worker exits with an error of its own
 * (not killed by a signal) while no other worker serves: another one would fail the same way.
 */
import cluster, { type Worker } from 'node:cluster'
import { mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'

const MAX_WORKERS = 256
/** A worker still running this long after it was told to stop is killed. */
const STOP_TIMEOUT_MS = 10_000
/** A worker that died before it listened is started again after this long, doubled at each such
 * death in a row, up to MAX_RESTART_DELAY_MS: a machine out of memory is not kept busier still. */
const FIRST_RESTART_DELAY_MS = 100
const MAX_RESTART_DELAY_MS = 10_000

/** The number of processes WORKERS asks for: 1 when unset. */
export function workerCount (value: string | undefined): number {
  if (value === undefined || value === '') return 1
  const count = Number(value)
  if (!/^\d+$/.test(value) || count < 1 || count > MAX_WORKERS) {
    throw new Error(`WORKERS must be a whole number of processes from 1 to ${MAX_WORKERS}, got '${value}'`)
  }
  return count
}

/** One JSON line in the workers' log format (pino's), so one reader follows the whole service. */
function log (level: 'info' | 'error', msg: string, fields: object = {}): void {
  const levels = { info: 30, error: 50 }
  process.stdout.write(JSON.stringify({ level: levels[level], time: Date.now(), pid: process.pid, hostname: os.hostname(), ...fields, msg }) + '\n')
}

/**
 * Runs the primary: `workers` copies of this script (the workers) on one port and one registry.
 *
 * The workers accept connections themselves, from the listening socket they share (SCHED_NONE),
 * for the HTTP port and the gRPC port alike. With node:cluster's default round-robin, the primary
 * accepts each connection and hands it to a worker it believes alive; one handed to a worker that
 * died a moment before (its death not yet noticed: every worker killed at once) is neither
 * answered nor closed, and its client waits for its own timeout. Here a connection is accepted by
 * a live worker, or refused at once once no worker is left (the socket closes with the last one),
 * and served again on PORT as soon as a new worker listens. The cost: the kernel, not the primary,
 * spreads connections over the workers, less evenly (a busy worker takes fewer).
 */
export function runPrimary (workers: number): void {
  cluster.schedulingPolicy = cluster.SCHED_NONE
  // mkdtemp makes the directory with mode 0700: only this user can reach the store inside.
  const directory = mkdtempSync(path.join(os.tmpdir(), 'fastify-triton-shm-example-'))
  process.on('exit', () => rmSync(directory, { recursive: true, force: true }))
  const env = { SHARED_REGISTRY_PATH: path.join(directory, 'registry.db') }
  const running = new Set<Worker>()
  const serving = new Set<Worker>()
  const restarts = new Set<NodeJS.Timeout>()
  let failuresInARow = 0
  let stopping = false

  const start = (): void => {
    const worker = cluster.fork(env)
    running.add(worker)
    worker.once('listening', () => {
      serving.add(worker)
      failuresInARow = 0
    })
    worker.once('exit', (code, signal) => {
      running.delete(worker)
      const listened = serving.delete(worker)
      const fields = { workerPid: worker.process.pid, code, signal }
      if (stopping) {
        log('info', 'worker stopped', fields)
        if (running.size === 0) process.exit()
        return
      }
      if (listened) {
        log('error', 'worker died; starting another', fields)
        return start()
      }
      if (signal === null && serving.size === 0) {
        // It failed of its own accord with nobody serving: another one would fail the same way.
        log('error', 'worker exited before it listened; stopping the service', fields)
        process.exitCode = 1
        return stop()
      }
      const delayMs = Math.min(MAX_RESTART_DELAY_MS, FIRST_RESTART_DELAY_MS * 2 ** failuresInARow++)
      log('error', 'worker exited before it listened; starting another', { ...fields, delayMs })
      const restart = setTimeout(() => {
        restarts.delete(restart)
        start()
      }, delayMs)
      restarts.add(restart)
    })
  }

  const stop = (): void => {
    if (stopping) return
    stopping = true
    for (const restart of restarts) clearTimeout(restart)
    if (running.size === 0) process.exit()
    for (const worker of running) {
      worker.process.kill('SIGTERM')
      setTimeout(() => worker.process.kill('SIGKILL'), STOP_TIMEOUT_MS).unref()
    }
  }

  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    // Every signal after the first is ignored, never left to the default action: that would end
    // the primary before its workers, leaving the store's directory behind.
    process.on(signal, () => {
      if (stopping) return
      log('info', 'stopping the workers', { signal })
      stop()
    })
  }
  log('info', 'starting workers that share one registry', { workers, store: env.SHARED_REGISTRY_PATH })
  for (let index = 0; index < workers; index++) start()
}
