/** An earlier revision of this repository, checked out beside it for a bench to compare with. */
import { execFileSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'

const ROOT = path.join(__dirname, '..')

/** A checkout of `revision` in a temporary worktree, its addon built (the Node headers of this
 * Node, no download); removed at exit. */
export function checkout (revision: string): string {
  const directory = mkdtempSync(path.join(os.tmpdir(), 'fastify-triton-shm-version-'))
  execFileSync('git', ['-C', ROOT, 'worktree', 'add', '--detach', directory, revision], { stdio: 'ignore' })
  process.on('exit', () => {
    try {
      execFileSync('git', ['-C', ROOT, 'worktree', 'remove', '--force', directory], { stdio: 'ignore' })
    } finally {
      rmSync(directory, { recursive: true, force: true })
    }
  })
  const nodedir = process.env.npm_config_nodedir ?? path.resolve(process.execPath, '../..')
  execFileSync(process.execPath, [require.resolve('node-gyp/bin/node-gyp.js'), 'rebuild', `--nodedir=${nodedir}`],
    { cwd: directory, stdio: ['ignore', 'ignore', 'pipe'] })
  return directory
}
