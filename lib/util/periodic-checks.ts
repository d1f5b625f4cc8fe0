/**
 * Checks run every so often for as long as something is watched (a response's progress, a
 * request's arrival), shared by everything watched at one period: a timer each would have Node
 * make and drop a timer list for every request, at a server's request rate. One unref'd interval
 * per period runs while any check is registered at it, and stops at the first tick that finds none.
 */
const periods = new Map<number, Set<() => void>>()

/** The period a deadline of `ms` is checked at: a tenth of it, from 10 ms to 1 s. So a deadline
 * is seen passed within [ms, ms + period]. */
export const checkPeriodFor = (ms: number): number => Math.min(1000, Math.max(10, Math.ceil(ms / 10)))

/** Runs `check` every `periodMs` (the first time within `periodMs` of now) until the returned
 * function is called, or `check` calls it. */
export function checkEvery (periodMs: number, check: () => void): () => void {
  const checks = periods.get(periodMs) ?? startChecks(periodMs)
  checks.add(check)
  return () => { checks.delete(check) }
}

function startChecks (periodMs: number): Set<() => void> {
  const checks = new Set<() => void>()
  periods.set(periodMs, checks)
  const timer = setInterval(() => {
    if (checks.size > 0) {
      for (const check of checks) check()
      return
    }
    clearInterval(timer)
    periods.delete(periodMs)
  }, periodMs)
  timer.unref()
  return checks
}

/** The checks registered now, each a call's while it is in flight: none outlives its call. */
export function pendingChecks (): number {
  let count = 0
  for (const checks of periods.values()) count += checks.size
  return count
}
