/**
 * A fixture script in a child process that answers commands one at a time: a JSON line in on
 * stdin, a JSON line out on stdout. Its first line names its pid. Killed on teardown.
 */
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { createInterface } from 'node:readline'
import type { Test } from 'tap'
import { bounded } from './sync'

export interface Reply { result?: unknown, error?: string, kind?: string, code?: string }

export interface CommandChild {
  pid: number
  send (command: object): Promise<Reply>
  /** Ends the process with SIGKILL: no cleanup of any kind runs in it. */
  kill (): Promise<void>
}

/** Starts `script` with `args`; `what` names it in the errors of a child that stops answering. */
export async function startCommandChild (t: Test, script: string, args: string[], what: string): Promise<CommandChild> {
  // The child compiles lib/ with tsx: its coverage would be merged under other line maps.
  const child = spawn(process.execPath, ['--import', 'tsx', script, ...args], {
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
    const { value, done } = await bounded(lines.next(), `a reply from ${what}`)
    if (done === true) throw new Error(`${what} ended`)
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
