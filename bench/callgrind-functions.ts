/**
 * A callgrind profile of node as instructions per function: each native function by its name, and
 * each piece of V8's generated code by the JavaScript function it was compiled from, read from the
 * map node writes with `--perf-basic-prof` (`perfMapFile`: start, size and name of every piece of
 * code, in the order made; a later piece may take an earlier one's addresses).
 */
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'

const run = promisify(execFile)

interface CodeRange {
  start: number
  end: number
  name: string
  /** Its place in the map: where ranges overlap, the latest holds the address. */
  order: number
}

/** Names addresses of generated code by a perf map's text. */
export class PerfMap {
  readonly #ranges: CodeRange[]

  constructor (text: string) {
    this.#ranges = text.split('\n').flatMap((line, order) => {
      const [start, size, ...name] = line.split(' ')
      if (name.length === 0) return []
      const from = Number.parseInt(start, 16)
      return [{ start: from, end: from + Number.parseInt(size, 16), name: name.join(' '), order }]
    }).sort((a, b) => a.start - b.start)
  }

  /** The function whose code holds `address` (the latest made there), if any. */
  nameOf (address: number): string | undefined {
    let holder: CodeRange | undefined
    // Ranges start in order: look back from the last one starting at or before the address.
    for (let index = this.#lastStartingAtOrBefore(address); index >= 0; index--) {
      const range = this.#ranges[index]
      if (address < range.end && (holder === undefined || range.order > holder.order)) holder = range
      if (address - range.start > MAX_CODE_BYTES) break
    }
    return holder?.name
  }

  #lastStartingAtOrBefore (address: number): number {
    let low = 0
    let high = this.#ranges.length - 1
    while (low <= high) {
      const middle = (low + high) >> 1
      if (this.#ranges[middle].start <= address) low = middle + 1
      else high = middle - 1
    }
    return high
  }
}

/** No piece of generated code the profiles here name is longer. */
const MAX_CODE_BYTES = 1024 ** 2

/** Instructions per function of the callgrind profile `out` (self cost, not its callees'), the
 * generated code named through `perfMap` when given (otherwise by address). */
export async function functionInstructions (out: string, perfMap?: PerfMap): Promise<Map<string, number>> {
  const { stdout } = await run('callgrind_annotate', ['--inclusive=no', '--threshold=100', out], { maxBuffer: 256 * 1024 ** 2 })
  const costs = new Map<string, number>()
  for (const line of stdout.split('\n')) {
    const row = /^\s*([\d,]+) \(\s*[\d.]+%\)\s+(?:\?\?\?:)?(.*?)(?: \[[^\]]*\])?$/.exec(line)
    if (row === null || row[2] === 'PROGRAM TOTALS') continue
    // `'2`: callgrind's mark of a recursive call's cost, the same function.
    const listed = row[2].replace(/'\d+$/, '')
    const address = /^0x([0-9a-f]+)/.exec(listed)
    const name = address === null ? listed : perfMap?.nameOf(Number.parseInt(address[1], 16)) ?? listed
    costs.set(name, (costs.get(name) ?? 0) + Number(row[1].replaceAll(',', '')))
  }
  return costs
}

/** Where node with `--perf-basic-prof` writes the map of the process `pid`. */
export const perfMapFile = (pid: number): string => `/tmp/perf-${pid}.map`
