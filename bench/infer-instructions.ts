/**
 * The infer floor's ladder in instructions: what each step of the package's infer path costs the
 * process, counted by valgrind (callgrind), not timed. A shared host's speed drifts by tens of
 * percent within a minute, so a timed bench cannot see a change of a few percent; instructions
 * executed do not depend on the machine's load. Each rung (bench/floor-routes.ts) is served
 * through `app.inject` by bench/inject-ladder.ts, twice: 1,000 requests more in one run than in
 * the other, each after the same warm-up (5,000 requests) and ending with a full collection, so
 * the difference is those requests' whole cost, their garbage's collection included. V8 runs predictably
 * (`--predictable`: one thread, fixed seeds); two identical runs agree within about 1%. No
 * sockets: the kernel's part, which the timed floor (bench/infer-floor.ts) includes, is not here.
 *
 *   npx tsx bench/infer-instructions.ts [--revision <rev>] [--rungs bare,table]
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
const REQUESTS = 1000
const NODE_FLAGS = ['--predictable', '--hash-seed=1', '--random-seed=1', '--expose-gc']
/** This checkout's harness, copied into a revision's worktree. */
const HARNESS = ['inject-ladder.ts', 'floor-routes.ts', 'server-protocol.ts', 'simple-shm.ts', 'shm-objects.ts']

const run = promisify(execFile)

/** Instructions the compiled harness executes serving `requests` requests of `rung` after its warm-up. */
async function instructions (harness: string, rung: InjectRung, requests: number): Promise<number> {
  const directory = mkdtempSync(path.join(os.tmpdir(), 'fastify-triton-shm-callgrind-'))
  try {
    const out = path.join(directory, 'callgrind.out')
    await run('valgrind', ['--tool=callgrind', '--smc-check=all-non-file', `--callgrind-out-file=${out}`, process.execPath, ...NODE_FLAGS, harness], {
      env: { ...process.env, NODE_ENV: 'production', INJECT_RUNG: rung, INJECT_REQUESTS: String(requests) },
      maxBuffer: 64 * 1024 ** 2
    })
    const totals = /^(?:summary|totals): (\d+)/m.exec(readFileSync(out, 'utf8'))
    if (totals === null) throw new Error('callgrind wrote no totals')
    return Number(totals[1])
  } finally {
    rmSync(directory, { recursive: true, force: true })
  }
}

/** Instructions per request of `rung`: the two runs side by side (one per core). */
async function perRequest (harness: string, rung: InjectRung): Promise<number> {
  const [without, withRequests] = await Promise.all([instructions(harness, rung, 0), instructions(harness, rung, REQUESTS)])
  return (withRequests - without) / REQUESTS
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
  const versions = [{ label: 'this checkout', harness: harnessOf(ROOT) }]
  if (revision !== undefined) versions.push({ label: revision, harness: harnessOf(checkout(revision)) })
  const counts = new Map<string, Map<InjectRung, number>>(versions.map(({ label }) => [label, new Map()]))
  for (const rung of rungs) {
    for (const { label, harness } of versions) {
      progress(`${label}: ${rung}, under valgrind`)
      counts.get(label)?.set(rung, await perRequest(harness, rung))
    }
  }
  for (const { label } of versions) {
    const of = counts.get(label) as Map<InjectRung, number>
    const bare = of.get('bare')
    process.stdout.write(table(`Instructions per request through app.inject, simple_js over shared memory: ${label}`,
      ['rung', 'instructions', 'step adds', 'vs bare'],
      rungs.map((rung, index) => [rung, num(of.get(rung) as number),
        index === 0 ? '' : num((of.get(rung) as number) - (of.get(rungs[index - 1]) as number)),
        bare === undefined ? '' : ratio((of.get(rung) as number) / bare)])) + '\n')
  }
  if (revision !== undefined) {
    process.stdout.write(table(`This checkout / ${revision}`, ['rung', 'instructions ratio'],
      rungs.map((rung) => [rung, ratio((counts.get('this checkout')?.get(rung) as number) / (counts.get(revision)?.get(rung) as number))])) + '\n')
  }
}

main().catch((error) => {
  process.stderr.write(`bench failed: ${(error as Error).stack ?? String(error)}\n`)
  process.exit(1)
})
