/**
 * Other processes of a service that serve a model table with a shared registry: each one is
 * test/fixtures/model-table-peer.ts in a child process, answering commands one at a time.
 */
import path from 'node:path'
import type { Test } from 'tap'
import { type CommandChild, startCommandChild } from './command-child'

const PEER = path.join(__dirname, '..', 'fixtures', 'model-table-peer.ts')

export interface ModelPeer extends CommandChild {
  /** Sends a command and resolves with its reply's result; rejects with a refusal's message. */
  call<T = unknown> (command: object): Promise<T>
}

export async function startModelPeer (t: Test, store: string): Promise<ModelPeer> {
  const child = await startCommandChild(t, PEER, [store], 'the model peer process')
  return {
    ...child,
    call: async <T>(command: object) => {
      const reply = await child.send(command)
      if (reply.error !== undefined) throw Object.assign(new Error(reply.error), { kind: reply.kind, code: reply.code })
      return reply.result as T
    }
  }
}
