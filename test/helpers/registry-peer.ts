/**
 * Other processes that share a registry with the test: each one is test/fixtures/shared-registry-peer.ts
 * in a child process, answering commands one at a time.
 */
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { createInterface } from 'node:readline'
import type { Test } from 'tap'
import { bounded } from './sync'

const PEER = path.join(__dirname, '..', 'fixtures', 'shared-registry-peer.ts')

export interface Reply { result?: unknown, error?: string, kind?: string, code?: string }

export interface RegistryPeer {
  pid: number
  send (command: object): Promise<Reply>
  /** Ends the process with SIGKILL: no cleanup of any kind runs in it. */
  kill (): Promise<void>
}

/** A new store path in a private directory, removed when the test ends. */
export function storePath (t: Test): string {
  const directory = mkdtempSync(path.join(tmpdir(), 'fts-store-'))
  const store = path.join(directory, 'registry.db')
  // Registered first, so it runs last: after every user closed and every child was killed. The
  // directory holds the lease table too (`<store>-leases`).
  t.teardown(() => rmSync(directory, { recursive: true, force: true }))
  return store
}

export async function startPeer (t: Test, store: string, checkIntervalMs = 100): Promise<RegistryPeer> {
  // The child compiles lib/ with tsx: its coverage would be merged under other line maps.
  const child = spawn(process.execPath, ['--import', 'tsx', PEER, store, String(checkIntervalMs)], {
    env: { ...process.env, _TAPJS_PROCESSINFO_COVERAGE_: '0' },
    stdio: ['pipe', 'pipe', 'inherit']
  })
  const exited = once(child, 'exit')
  t.teardown(async () => {
    if (child.exitCode !== null || child.signalCode !== null) return
    child.kill('SIGKILL')
    await exited
  })
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]()
  const next = async (): Promise<Reply & { pid?: number }> => {
    const { value, done } = await bounded(lines.next(), 'a reply from the peer process')
    if (done === true) throw new Error('the peer process ended')
    return JSON.parse(value)
  }
  const { pid } = await next()
  return {
    pid: pid as number,
    send: async (command) => {
      child.stdin.write(`${JSON.stringify(command)}\n`)
      return next()
    },
    kill: async () => {
      child.kill('SIGKILL')
      await exited
    }
  }
}
