/**
 * Ending a child started with `detached: true` together with every process it started (a
 * cluster's primary and its workers, npm and the scripts it runs).
 */

/** Sends `signal` to the whole process group led by `pid`; a group that is all gone already is no error. */
export function killGroup (pid: number, signal: NodeJS.Signals = 'SIGKILL'): void {
  try {
    process.kill(-pid, signal)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error
  }
}
