/**
 * A process as a shared store records it: its pid and its start time, so a pid the kernel hands
 * to a new process after a crash is never taken for the one that died.
 */
import { readFileSync } from 'node:fs'

export interface ProcessIdentity {
  pid: number
  /** Start time in clock ticks since boot (`/proc/<pid>/stat`, field 22). */
  startTime: number
}

/** The start time of a running process, or undefined if there is none with this pid. */
export function processStartTime (pid: number): number | undefined {
  let stat: string
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'latin1')
  } catch {
    return undefined
  }
  // The command name (field 2) is in parentheses and may hold spaces and parentheses itself:
  // the fields after the last ')' start at field 3.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return Number(fields[22 - 3])
}

export function thisProcess (): ProcessIdentity {
  return { pid: process.pid, startTime: processStartTime(process.pid) as number }
}

export function isAlive ({ pid, startTime }: ProcessIdentity): boolean {
  return processStartTime(pid) === startTime
}
