/** Text output: progress lines on stderr, result tables on stdout, human sizes and rates. */

const started = Date.now()

/** A progress line on stderr, stamped with seconds since the bench started. */
export function progress (message: string): void {
  process.stderr.write(`[${((Date.now() - started) / 1000).toFixed(1).padStart(5)} s] ${message}\n`)
}

export function elapsedSeconds (): number {
  return (Date.now() - started) / 1000
}

/** A table with a title and notes, for stdout. */
export function table (title: string, header: string[], rows: Array<Array<string | number>>, notes: string[] = []): string {
  const cells = [header, ...rows.map((row) => row.map(String))]
  const widths = header.map((_, column) => Math.max(...cells.map((row) => (row[column] ?? '').length)))
  const line = (row: string[]) => '| ' + row.map((cell, column) =>
    column === 0 ? cell.padEnd(widths[column]) : cell.padStart(widths[column])).join(' | ') + ' |'
  const rule = '|' + widths.map((width, column) => column === 0 ? '-'.repeat(width + 2) : '-'.repeat(width + 1) + ':').join('|') + '|'
  return [`\n### ${title}\n`, line(header), rule, ...cells.slice(1).map(line), ...(notes.length ? ['', ...notes] : []), ''].join('\n')
}

const UNITS = ['B', 'KiB', 'MiB', 'GiB']

export function bytes (count: number): string {
  let value = count
  let unit = 0
  while (value >= 1024 && unit < UNITS.length - 1) {
    value /= 1024
    unit++
  }
  return `${Number.isInteger(value) ? value : value.toFixed(1)} ${UNITS[unit]}`
}

export const gbPerSecond = (bytesPerSecond: number): string => `${(bytesPerSecond / 1e9).toFixed(2)} GB/s`

/** A number with 3 significant digits, thousands grouped. */
export function num (value: number, digits = 3): string {
  if (!Number.isFinite(value)) return String(value)
  if (Math.abs(value) >= 10 ** digits) return Math.round(value).toLocaleString('en-US')
  return Number(value.toPrecision(digits)).toString()
}

export const ms = (value: number): string => `${num(value)} ms`
export const ratio = (value: number): string => `${num(value)}x`
