/**
 * Other processes of a service that serve a model table with a shared registry: each one is
 * test/fixtures/model-table-peer.ts in a child process, answering commands one at a time.
 */
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import path from 'node:path'
import { createInterface } from 'node:readline'
import type { Test } from 'tap'
import type { Reply } from './registry-peer'
import { bounded } from './sync'

const PEER = path.join(__dirname, '..', 'fixtures', 'model-table-peer.ts')

export interface ModelPeer {
  pid: number
  /** Sends a command and resolves with its reply's result; rejects with a refusal's message. */
  call<T = unknown> (command: object): Promise<T>
  send (command: object): Promise<Reply>
  /** Ends the process with SIGKILL: no cleanup of any kind runs in it. */
  kill (): Promise<void>
}

export async function startModelPeer (t: Test, store: string): Promise<ModelPeer> {
  // The child compiles lib/ with tsx: its coverage would be merged under other line maps.
  const child = spawn(process.execPath, ['--import', 'tsx', PEER, store], {
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
    const { value, done } = await bounded(lines.next(), 'a reply from the model peer process')
    if (done === true) throw new Error('the model peer process ended')
    return JSON.parse(value)
  }
  const { pid } = await next()
  const send = async (command: object) => {
    child.stdin.write(`${JSON.stringify(command)}\n`)
    return next()
  }
  return {
    pid: pid as number,
    send,
    call: async <T>(command: object) => {
      const reply = await send(command)
      if (reply.error !== undefined) throw Object.assign(new Error(reply.error), { kind: reply.kind, code: reply.code })
      return reply.result as T
    },
    kill: async () => {
      child.kill('SIGKILL')
      await exited
    }
  }
}
