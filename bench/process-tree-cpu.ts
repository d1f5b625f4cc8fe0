/**
 * The CPU time a process and its descendants have used so far, read from /proc: a server run as
 * node:cluster workers is a primary and its children, and no one process can report all of them.
 */
import { execFileSync } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'

function childrenOf (pid: number): number[] {
  return readdirSync(`/proc/${pid}/task`).flatMap((task) =>
    readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8').split(' ').filter((child) => child !== '').map(Number))
}

/** utime + stime of `pid` alone, in ticks (fields 14 and 15, after the parenthesised name). */
function ownTicks (pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return Number(fields[11]) + Number(fields[12])
}

/** Microseconds of CPU (user and system) used by `pid` and every process under it. */
export function processTreeCpuMicros (pid: number): number {
  // Clock ticks per second, the unit of /proc/<pid>/stat's times.
  const ticksPerSecond = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim())
  let ticks = 0
  const pending = [pid]
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    ticks += ownTicks(next)
    pending.push(...childrenOf(next))
  }
  return ticks * 1e6 / ticksPerSecond
}
