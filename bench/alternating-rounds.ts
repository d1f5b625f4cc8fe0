/**
 * Cases timed in alternating rounds against one server process: each round runs every case for
 * `secondsPerRun`, so a busy machine slows each alike. A case's figures: requests per second, and
 * the server's CPU per request (from its own counters, read before and after each run).
 */
import type { ServerProcess } from './server-process'

export interface CaseResult { requestsPerSecond: number, serverCpuMicrosPerRequest: number, requests: number }

export interface RoundsPlan { rounds: number, secondsPerRun: number }

/** `runCase(name, deadline)` sends requests of the case until `deadline` (hrtime ns) and says how many it sent. */
export async function alternatingRounds<Case extends string> (server: ServerProcess, cases: readonly Case[], { rounds, secondsPerRun }: RoundsPlan,
  runCase: (name: Case, deadline: bigint) => Promise<number>): Promise<Record<Case, CaseResult>> {
  const totals = new Map(cases.map((name) => [name, { requests: 0, seconds: 0, cpuMicros: 0 }]))
  for (let round = 0; round < rounds; round++) {
    for (const name of cases) {
      const before = await server.stats()
      const start = process.hrtime.bigint()
      const requests = await runCase(name, start + BigInt(Math.round(secondsPerRun * 1e9)))
      const seconds = Number(process.hrtime.bigint() - start) / 1e9
      const after = await server.stats()
      const total = totals.get(name) as { requests: number, seconds: number, cpuMicros: number }
      total.requests += requests
      total.seconds += seconds
      total.cpuMicros += after.cpuMicros - before.cpuMicros
    }
  }
  return Object.fromEntries([...totals].map(([name, { requests, seconds, cpuMicros }]) =>
    [name, { requestsPerSecond: requests / seconds, serverCpuMicrosPerRequest: cpuMicros / requests, requests }])) as Record<Case, CaseResult>
}
