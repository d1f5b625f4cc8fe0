/**
 * The infer floor's ladder in instructions: what each step of the package's infer path costs the
 * process, counted by valgrind (callgrind), not timed. A shared host's speed drifts by tens of
 * percent within a minute, so a timed bench cannot see a change of a few percent; instructions
 * executed do not depend on the machine's load. Each rung (bench/floor-routes.ts) is served
 * through `app.inject` by bench/inject-ladder.ts, twice: `--requests` (4,000) more in one run than in
 * the other, each after the same warm-up (5,000 requests) and ending with a full collection, so
 * the difference is those requests' whole cost, their garbage's collection included. V8 runs
 * predictably (`--predictable`: one thread, fixed seeds). The collector's part is also counted
 * apart (by its functions, `callgrind_annotate`): whether a full collection falls inside the
 * counted requests moves the whole by up to a fifth, where what runs outside the collector
 * agrees within about 2%; compare revisions there. No sockets: the kernel's part, which the
 * timed floor (bench/infer-floor.ts) includes, is not here.
 *
 *   npx tsx bench/infer-instructions.ts [--revision <rev>] [--rungs bare,table] [--requests 4000]
 *
 * With a revision, that revision's package and example run this checkout's harness, side by side
 * with this checkout. Needs valgrind (`apt-get install valgrind`); several minutes per rung.
 */
import { execFile, execFileSync } from 'node:child_process'
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'
import { num, progress, ratio, table } from './format'
import { INJECT_RUNGS, type InjectRung } from './inject-ladder'
import { checkout } from './revision-checkout'
import { buildServer } from './server-build'

const ROOT = path.join(__dirname, '..')
const NODE_FLAGS = ['--predictable', '--hash-seed=1', '--random-seed=1', '--expose-gc']
/** This checkout's harness, copied into a revision's worktree. */
const HARNESS = ['inject-ladder.ts', 'floor-routes.ts', 'server-protocol.ts', 'simple-shm.ts', 'shm-objects.ts']

const run = promisify(execFile)

/** What one run executed: all of it, and the part in V8's garbage collector. */
interface Counted {
  instructions: number
  collector: number
}

/** V8's collector by its C++ names (scavenges, marking, sweeping, evacuation, their visitors).
 * Its schedule follows the clock as well as the allocations (V8's memory reducer), so it differs
 * with the machine's load: whether a full collection falls inside the counted requests moves the
 * total by up to a fifth, where the rest agrees within about 2% run to run. */
const COLLECTOR = /Scaveng|Marking|MarkCompact|MarkBit|Sweep|Evacuat|Pretenuring|RememberedSet|SlotSet|BodyDescriptor|LiveObject|FreeList|heap::base|Heap::|HeapObject::SizeFromMap|RecordMigrated|WhiteToGrey|StringTableCleaner|RelocIterator|GCTracer/

/** The instructions of the functions `callgrind_annotate` lists that match COLLECTOR. */
async function collectorInstructions (out: string): Promise<number> {
  const { stdout } = await run('callgrind_annotate', ['--inclusive=no', '--threshold=100', out], { maxBuffer: 256 * 1024 ** 2 })
  let sum = 0
  for (const line of stdout.split('\n')) {
    const row = /^\s*([\d,]+) \(\s*[\d.]+%\)\s+(.*)$/.exec(line)
    if (row !== null && COLLECTOR.test(row[2])) sum += Number(row[1].replaceAll(',', ''))
  }
  return sum
}

/** What the compiled harness executes serving `requests` requests of `rung` after its warm-up. */
async function counted (harness: string, rung: InjectRung, requests: number): Promise<Counted> {
  const directory = mkdtempSync(path.join(os.tmpdir(), 'fastify-triton-shm-callgrind-'))
  try {
    const out = path.join(directory, 'callgrind.out')
    await run('valgrind', ['--tool=callgrind', '--smc-check=all-non-file', `--callgrind-out-file=${out}`, process.execPath, ...NODE_FLAGS, harness], {
      env: { ...process.env, NODE_ENV: 'production', INJECT_RUNG: rung, INJECT_REQUESTS: String(requests) },
      maxBuffer: 64 * 1024 ** 2
    })
    const totals = /^(?:summary|totals): (\d+)/m.exec(readFileSync(out, 'utf8'))
    if (totals === null) throw new Error('callgrind wrote no totals')
    return { instructions: Number(totals[1]), collector: await collectorInstructions(out) }
  } finally {
    rmSync(directory, { recursive: true, force: true })
  }
}

/** Per request of `rung`: the two runs side by side (one per core). */
async function perRequest (harness: string, rung: InjectRung, requests: number): Promise<Counted> {
  const [without, withRequests] = await Promise.all([counted(harness, rung, 0), counted(harness, rung, requests)])
  return {
    instructions: (withRequests.instructions - without.instructions) / requests,
    collector: (withRequests.collector - without.collector) / requests
  }
}

function harnessOf (root: string): string {
  if (root !== ROOT) for (const file of HARNESS) copyFileSync(path.join(__dirname, file), path.join(root, 'bench', file))
  return buildServer('bench/inject-ladder.ts', root)
}

async function main () {
  const args = process.argv.slice(2)
  const option = (name: string) => { const at = args.indexOf(name); return at === -1 ? undefined : args[at + 1] }
  const rungs = (option('--rungs')?.split(',') ?? [...INJECT_RUNGS]) as InjectRung[]
  const unknown = rungs.filter((rung) => !INJECT_RUNGS.includes(rung))
  if (unknown.length > 0) throw new Error(`unknown rung ${unknown.join(', ')} (rungs: ${INJECT_RUNGS.join(', ')})`)
  try {
    execFileSync('valgrind', ['--version'], { stdio: 'ignore' })
  } catch {
    throw new Error('this bench counts instructions with valgrind: apt-get install valgrind')
  }
  const revision = option('--revision')
  const requests = Number(option('--requests') ?? 4000)
  if (!(Number.isInteger(requests) && requests > 0)) throw new Error('--requests must be a positive integer')
  const versions = [{ label: 'this checkout', harness: harnessOf(ROOT) }]
  if (revision !== undefined) versions.push({ label: revision, harness: harnessOf(checkout(revision)) })
  const counts = new Map<string, Map<InjectRung, Counted>>(versions.map(({ label }) => [label, new Map()]))
  for (const rung of rungs) {
    for (const { label, harness } of versions) {
      progress(`${label}: ${rung}, under valgrind`)
      counts.get(label)?.set(rung, await perRequest(harness, rung, requests))
    }
  }
  const outside = ({ instructions, collector }: Counted) => instructions - collector
  for (const { label } of versions) {
    const of = (rung: InjectRung) => counts.get(label)?.get(rung) as Counted
    const bare = rungs.includes('bare') ? outside(of('bare')) : undefined
    process.stdout.write(table(`Instructions per request through app.inject, simple_js over shared memory, ${num(requests)} requests: ${label}`,
      ['rung', 'instructions', 'in the collector', 'outside it', 'step adds', 'vs bare'],
      rungs.map((rung, index) => [rung, num(of(rung).instructions), num(of(rung).collector), num(outside(of(rung))),
        index === 0 ? '' : num(outside(of(rung)) - outside(of(rungs[index - 1]))),
        bare === undefined ? '' : ratio(outside(of(rung)) / bare)]),
      ['Steps and ratios outside the collector: where a full collection falls (the clock has a part in it) moves the whole by up to a fifth.']) + '\n')
  }
  if (revision !== undefined) {
    const ratioOf = (rung: InjectRung, count: (counted: Counted) => number) =>
      ratio(count(counts.get('this checkout')?.get(rung) as Counted) / count(counts.get(revision)?.get(rung) as Counted))
    process.stdout.write(table(`This checkout / ${revision}`, ['rung', 'instructions', 'outside the collector'],
      rungs.map((rung) => [rung, ratioOf(rung, ({ instructions }) => instructions), ratioOf(rung, outside)])) + '\n')
  }
}

main().catch((error) => {
  process.stderr.write(`bench failed: ${(error as Error).stack ?? String(error)}\n`)
  process.exit(1)
})
