/** Summaries of repeated measurements. */

export function median (values: number[]): number {
  return percentile(values, 50)
}

/** The nearest-rank percentile (`p` from 0 to 100) of `values`. */
export function percentile (values: number[], p: number): number {
  if (values.length === 0) return Number.NaN
  const sorted = [...values].sort((a, b) => a - b)
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length))
  return sorted[Math.min(rank, sorted.length) - 1]
}

export interface Percentiles { p50: number, p99: number, samples: number }

export const percentilesOf = (values: number[]): Percentiles =>
  ({ p50: percentile(values, 50), p99: percentile(values, 99), samples: values.length })

/** Nanoseconds per call of `body`, run `iterations` times in a row. */
export function nsPerCall (iterations: number, body: () => void): number {
  const started = process.hrtime.bigint()
  for (let index = 0; index < iterations; index++) body()
  return Number(process.hrtime.bigint() - started) / iterations
}

/**
 * Nanoseconds per call of `body`, run `iterations` times in a row, and then one turn of the event
 * loop, timed with them: the finalizers the calls queued run there, as they run between a
 * server's requests, so their cost is counted and they do not pile up over a long run.
 */
export async function nsPerCallSettled (iterations: number, body: () => void): Promise<number> {
  const started = process.hrtime.bigint()
  for (let index = 0; index < iterations; index++) body()
  await new Promise((resolve) => setImmediate(resolve))
  return Number(process.hrtime.bigint() - started) / iterations
}

/** Rounds to `digits` significant digits (for JSON a reader scans). */
export const round = (value: number, digits = 3): number =>
  Number.isFinite(value) ? Number(value.toPrecision(digits)) : value
