/**
 * Other processes that share a registry with the test: each one is test/fixtures/shared-registry-peer.ts
 * in a child process, answering commands one at a time.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import type { Test } from 'tap'
import { type CommandChild, startCommandChild } from './command-child'

const PEER = path.join(__dirname, '..', 'fixtures', 'shared-registry-peer.ts')

export type RegistryPeer = CommandChild

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
  return startCommandChild(t, PEER, [store, String(checkIntervalMs)], 'the peer process')
}
