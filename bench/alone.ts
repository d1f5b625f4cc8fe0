/**
 * A suite run alone (`npx tsx bench/<suite>.ts [--quick] [--cpu-prof]`): its bench server started
 * (profiled to bench/results/profiles/ with --cpu-prof), the suite run against it, the server
 * stopped, and a failure printed with a non-zero exit.
 */
import { mkdirSync } from 'node:fs'
import path from 'node:path'
import { progress } from './format'
import { ServerProcess, type ServerProcessOptions } from './server-process'

export function runAlone (suite: (server: ServerProcess, quick: boolean) => Promise<void>, options: ServerProcessOptions = {}): void {
  const args = process.argv.slice(2)
  const run = async () => {
    let cpuProfileDir: string | undefined
    if (args.includes('--cpu-prof')) {
      cpuProfileDir = path.join(__dirname, 'results', 'profiles')
      mkdirSync(cpuProfileDir, { recursive: true })
    }
    progress('compiling bench/server.ts to plain JS and starting it as a child process')
    const server = await ServerProcess.start({ ...options, cpuProfileDir })
    try {
      await suite(server, args.includes('--quick'))
    } finally {
      await server.stop()
    }
  }
  run().catch((error) => {
    process.stderr.write(`bench failed: ${(error as Error).stack ?? String(error)}\n`)
    process.exit(1)
  })
}
