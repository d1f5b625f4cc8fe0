/**
 * Register and unregister over HTTP: each connection registers a region under a new name, then
 * unregisters it, again and again; the latency of each kind of request is kept apart.
 */
import { KServeClient } from '../lib/index'
import { progress } from './format'
import { runLoad } from './load'
import type { ServerProcess } from './server-process'
import { makeObject, removeObject } from './shm-objects'
import { type Percentiles, percentilesOf } from './stats'

const REGION_BYTES = 64 * 1024
const SYSTEM = '/v2/systemsharedmemory'

export interface RegisterHttpResult {
  regionBytes: number
  connections: number
  seconds: number
  /** register + unregister pairs per second. */
  cyclesPerSecond: number
  registerMs: Percentiles
  unregisterMs: Percentiles
}

export interface RegisterHttpPlan {
  seconds: number
  connections: number
}

export async function registerHttpSuite (server: ServerProcess, plan: RegisterHttpPlan): Promise<RegisterHttpResult> {
  const object = makeObject('register_http', REGION_BYTES)
  const client = new KServeClient(server.url)
  let counter = 0
  const body = JSON.stringify({ key: object.key, offset: 0, byte_size: REGION_BYTES })
  const requests = [
    {
      method: 'POST' as const,
      path: `${SYSTEM}/region/bench_http_register/register`,
      headers: { 'content-type': 'application/json' },
      body,
      kind: 'register',
      setupRequest: (request: { path?: string }, context: Record<string, unknown>) => {
        context.name = `bench_http_${counter++}`
        request.path = `${SYSTEM}/region/${context.name as string}/register`
        return request
      }
    },
    {
      method: 'POST' as const,
      path: `${SYSTEM}/region/bench_http_register/unregister`,
      kind: 'unregister',
      setupRequest: (request: { path?: string }, context: Record<string, unknown>) => {
        request.path = `${SYSTEM}/region/${context.name as string}/unregister`
        return request
      }
    }
  ]
  try {
    const warmupSeconds = Math.min(1, plan.seconds / 3)
    await runLoad({ url: server.url, requests, connections: plan.connections, durationSeconds: warmupSeconds })
    await client.unregisterSystemSharedMemory()
    const load = await runLoad({ url: server.url, requests, connections: plan.connections, durationSeconds: plan.seconds })
    // A run that stops between a register and its unregister leaves that region: remove them all,
    // then make sure nothing else was left behind.
    await client.unregisterSystemSharedMemory()
    const left = await client.systemSharedMemoryStatus()
    if (left.length !== 0) throw new Error(`${left.length} regions still registered after the register suite`)
    const registers = load.latencies.get('register') ?? []
    const unregisters = load.latencies.get('unregister') ?? []
    const result = {
      regionBytes: REGION_BYTES,
      connections: plan.connections,
      seconds: load.seconds,
      cyclesPerSecond: Math.min(registers.length, unregisters.length) / load.seconds,
      registerMs: percentilesOf(registers),
      unregisterMs: percentilesOf(unregisters)
    }
    progress(`register over HTTP: ${result.cyclesPerSecond.toFixed(0)} register+unregister/s, ` +
      `register p50 ${result.registerMs.p50.toFixed(2)} ms, unregister p50 ${result.unregisterMs.p50.toFixed(2)} ms`)
    return result
  } finally {
    await client.unregisterSystemSharedMemory().catch(() => {})
    removeObject(object)
  }
}
