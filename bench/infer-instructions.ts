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
 *   npx tsx bench/infer-instructions.ts [--revision <rev>] [--rungs bare,table] [--requests 4000] [--functions]
 *
 * `--functions`: also what each step adds by function, V8's generated code named by the
 * JavaScript it was compiled from (node's `--perf-basic-prof` map, bench/callgrind-functions.ts).
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
import { functionInstructions, PerfMap, perfMapFile } from './callgrind-functions'
import { checkout } from './revision-checkout'
import { buildServer } from './server-build'

const ROOT = path.join(__dirname, '..')
const NODE_FLAGS = ['--predictable', '--hash-seed=1', '--random-seed=1', '--expose-gc']
/** This checkout's harness, copied into a revision's worktree. */
const HARNESS = ['inject-ladder.ts', 'floor-routes.ts', 'server-protocol.ts', 'simple-shm.ts', 'shm-objects.ts']

const run = promisify(execFile)

/** What one run executed: all of it, the part in V8's garbage collector, and (`--functions`)
 * each function's. */
interface Counted {
  instructions: number
  collector: number
  functions?: Map<string, number>
}

/** V8's collector by its C++ names (scavenges, marking, sweeping, evacuation, their visitors).
 * Its schedule follows the clock as well as the allocations (V8's memory reducer), so it differs
 * with the machine's load: whether a full collection falls inside the counted requests moves the
 * total by up to a fifth, where the rest agrees within about 2% run to run. */
const COLLECTOR = /Scaveng|Marking|MarkCompact|MarkBit|Sweep|Evacuat|Pretenuring|RememberedSet|SlotSet|BodyDescriptor|LiveObject|FreeList|heap::base|Heap::|HeapObject::SizeFromMap|RecordMigrated|WhiteToGrey|StringTableCleaner|RelocIterator|GCTracer|NewSpace/

/** V8's generated code is never the collector, whatever its JavaScript is named. */
const isCollector = (name: string) => !name.startsWith('JS:') && COLLECTOR.test(name)

const sumOf = (costs: Map<string, number>, of: (name: string) => boolean) =>
  [...costs].reduce((sum, [name, cost]) => of(name) ? sum + cost : sum, 0)

/** What the compiled harness executes serving `requests` requests of `rung` after its warm-up;
 * `byFunction`: each function's part too, V8's generated code named by node's perf map. */
async function counted (harness: string, rung: InjectRung, requests: number, byFunction: boolean): Promise<Counted> {
  const directory = mkdtempSync(path.join(os.tmpdir(), 'fastify-triton-shm-callgrind-'))
  const out = path.join(directory, 'callgrind.out')
  const nodeFlags = byFunction ? [...NODE_FLAGS, '--perf-basic-prof'] : NODE_FLAGS
  const counting = run('valgrind', ['--tool=callgrind', '--smc-check=all-non-file', `--callgrind-out-file=${out}`, process.execPath, ...nodeFlags, harness], {
    env: { ...process.env, NODE_ENV: 'production', INJECT_RUNG: rung, INJECT_REQUESTS: String(requests) },
    maxBuffer: 64 * 1024 ** 2
  })
  // Valgrind runs node in its own process: node's perf map is named by valgrind's pid.
  const perfMap = byFunction && counting.child.pid !== undefined ? perfMapFile(counting.child.pid) : undefined
  try {
    await counting
    const totals = /^(?:summary|totals): (\d+)/m.exec(readFileSync(out, 'utf8'))
    if (totals === null) throw new Error('callgrind wrote no totals')
    const functions = await functionInstructions(out, perfMap === undefined ? undefined : new PerfMap(readFileSync(perfMap, 'utf8')))
    return { instructions: Number(totals[1]), collector: sumOf(functions, isCollector), ...(byFunction && { functions }) }
  } finally {
    if (perfMap !== undefined) rmSync(perfMap, { force: true })
    rmSync(directory, { recursive: true, force: true })
  }
}

/** Per request of `rung`: the two runs side by side (one per core). */
async function perRequest (harness: string, rung: InjectRung, requests: number, byFunction: boolean): Promise<Counted> {
  const [without, withRequests] = await Promise.all([counted(harness, rung, 0, byFunction), counted(harness, rung, requests, byFunction)])
  return {
    instructions: (withRequests.instructions - without.instructions) / requests,
    collector: (withRequests.collector - without.collector) / requests,
    ...(withRequests.functions !== undefined && { functions: added(without.functions ?? new Map(), withRequests.functions, requests) })
  }
}

/** What each function executed more in `after` than in `before`, divided by `count`. */
function added (before: Map<string, number>, after: Map<string, number>, count = 1): Map<string, number> {
  const names = new Set([...before.keys(), ...after.keys()])
  return new Map([...names].map((name) => [name, ((after.get(name) ?? 0) - (before.get(name) ?? 0)) / count]))
}

/** The functions outside the collector that add most from one rung to the next. */
function stepFunctions (step: string, before: Map<string, number>, after: Map<string, number>): string {
  const most = [...added(before, after)].filter(([name]) => !isCollector(name)).sort((a, b) => b[1] - a[1]).slice(0, FUNCTIONS_SHOWN)
  return table(`What ${step} adds, by function (outside the collector), instructions per request`, ['function', 'adds'],
    most.map(([name, instructions]) => [shortName(name), num(instructions)]))
}

const FUNCTIONS_SHOWN = 15

/** A function's name without the build directory, at most 100 characters. */
function shortName (name: string): string {
  const short = name.replace(/ \S*?\/(lib|bench|example|node_modules)\//, ' $1/')
  return short.length > 100 ? `${short.slice(0, 99)}…` : short
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
  const byFunction = args.includes('--functions')
  if (!(Number.isInteger(requests) && requests > 0)) throw new Error('--requests must be a positive integer')
  const versions = [{ label: 'this checkout', harness: harnessOf(ROOT) }]
  if (revision !== undefined) versions.push({ label: revision, harness: harnessOf(checkout(revision)) })
  const counts = new Map<string, Map<InjectRung, Counted>>(versions.map(({ label }) => [label, new Map()]))
  for (const rung of rungs) {
    for (const { label, harness } of versions) {
      progress(`${label}: ${rung}, under valgrind`)
      counts.get(label)?.set(rung, await perRequest(harness, rung, requests, byFunction))
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
    if (!byFunction) continue
    for (let index = 1; index < rungs.length; index++) {
      process.stdout.write(stepFunctions(`${rungs[index]} (${label})`, of(rungs[index - 1]).functions as Map<string, number>,
        of(rungs[index]).functions as Map<string, number>) + '\n')
    }
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
