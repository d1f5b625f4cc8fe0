/**
 * Summarizes `node --cpu-prof` profiles (as written by `npm run bench -- --cpu-prof`): the
 * functions with the most self time, and the most inclusive time, so a missed goal can be traced.
 *
 *   npx tsx bench/profile.ts bench/results/profiles/*.cpuprofile [--top 25] [--filter text]
 */
import { readFileSync } from 'node:fs'
import path from 'node:path'

interface ProfileNode {
  id: number
  callFrame: { functionName: string, url: string, lineNumber: number }
  hitCount: number
  children?: number[]
}

interface Profile { nodes: ProfileNode[], startTime: number, endTime: number, samples: number[], timeDeltas: number[] }

export interface FunctionTime { name: string, selfMs: number, totalMs: number }

/** Where a frame's code lives, relative to the project (the bench server runs compiled in a temporary directory). */
const sourceOf = (url: string) => url.replace(/^file:\/\//, '').replace(/^.*\/fastify-triton-shm-bench-server-[^/]+\//, '') || url

const frameName = ({ functionName, url, lineNumber }: ProfileNode['callFrame']) =>
  `${functionName || '(anonymous)'} ${url === '' ? '' : `${path.isAbsolute(sourceOf(url)) ? path.relative(process.cwd(), sourceOf(url)) : sourceOf(url)}:${lineNumber + 1}`}`.trim()

/** Self and inclusive milliseconds per function (recursion counted once). */
export function functionTimes (profile: Profile): FunctionTime[] {
  const msPerSample = (profile.endTime - profile.startTime) / 1000 / Math.max(profile.samples.length, 1)
  const byId = new Map(profile.nodes.map((node) => [node.id, node]))
  const times = new Map<string, FunctionTime>()
  const visit = (node: ProfileNode, onStack: Set<string>): number => {
    const name = frameName(node.callFrame)
    let total = node.hitCount
    for (const child of node.children ?? []) total += visit(byId.get(child) as ProfileNode, new Set([...onStack, name]))
    const entry = times.get(name) ?? { name, selfMs: 0, totalMs: 0 }
    entry.selfMs += node.hitCount * msPerSample
    if (!onStack.has(name)) entry.totalMs += total * msPerSample
    times.set(name, entry)
    return total
  }
  visit(profile.nodes[0], new Set())
  return [...times.values()]
}

function main () {
  const args = process.argv.slice(2)
  const option = (name: string) => {
    const index = args.indexOf(name)
    return index === -1 ? undefined : args.splice(index, 2)[1]
  }
  const top = Number(option('--top') ?? 25)
  const filter = option('--filter')
  for (const file of args) {
    const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile
    const times = functionTimes(profile).filter((time) => filter === undefined || time.name.includes(filter))
    const wallMs = (profile.endTime - profile.startTime) / 1000
    console.log(`\n${file}: ${(wallMs / 1000).toFixed(1)} s profiled`)
    for (const [title, key] of [['self', 'selfMs'], ['inclusive', 'totalMs']] as const) {
      console.log(`\n  top ${top} by ${title} time`)
      for (const time of [...times].sort((a, b) => b[key] - a[key]).slice(0, top)) {
        console.log(`  ${time.selfMs.toFixed(0).padStart(8)} ms self ${time.totalMs.toFixed(0).padStart(8)} ms total  ${time.name}`)
      }
    }
  }
}

if (require.main === module) main()
