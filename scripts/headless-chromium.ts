/**
 * One headless Chromium run against a page (its DOM once rendered, or a screenshot): a fresh
 * profile removed afterwards, no traffic of its own beyond the page, and every process of the
 * run killed however it ends. Pages that render client-side (Swagger UI) are given virtual time:
 * Chromium runs them until nothing is pending or the budget is spent, then answers.
 */
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'

export const INSTALL_HINT = 'install it with `apt-get install chromium` (Debian, Ubuntu)'

const FLAGS = [
  '--headless',
  // Root in a container: Chromium's sandbox needs user namespaces it may not have.
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--hide-scrollbars'
]

export interface ChromiumRun {
  executable: string
  url: string
  /** What to do with the page: `['--dump-dom']`, `['--screenshot=file.png', '--window-size=1280,1400']`. */
  action: string[]
  /** Virtual time the page may use to render (milliseconds). */
  renderBudgetMs?: number
  /** The run is killed, and fails, after this long (milliseconds). */
  timeoutMs?: number
}

/** Runs Chromium once; resolves with what it printed on stdout. */
export async function runHeadlessChromium ({ executable, url, action, renderBudgetMs = 10_000, timeoutMs = 60_000 }: ChromiumRun): Promise<string> {
  const profile = mkdtempSync(path.join(tmpdir(), 'fastify-triton-shm-chromium-'))
  const args = [...FLAGS, `--user-data-dir=${profile}`, `--virtual-time-budget=${renderBudgetMs}`, ...action, url]
  // Its own process group, so that the renderer and helper processes go with it.
  const chromium = spawn(executable, args, { detached: true, stdio: ['ignore', 'pipe', 'pipe'] })
  const killAll = () => {
    try {
      process.kill(-chromium.pid!, 'SIGKILL')
    } catch {} // the group has ended already
  }
  let stdout = ''
  let stderr = ''
  chromium.stdout.setEncoding('utf8').on('data', (chunk: string) => { stdout += chunk })
  chromium.stderr.setEncoding('utf8').on('data', (chunk: string) => { stderr = (stderr + chunk).slice(-4000) })
  let timer: NodeJS.Timeout | undefined
  try {
    await new Promise<void>((resolve, reject) => {
      chromium.once('error', (error: NodeJS.ErrnoException) => {
        reject(error.code === 'ENOENT' ? new Error(`${executable} not found: ${INSTALL_HINT}`) : error)
      })
      chromium.once('close', (code, signal) => {
        if (code === 0) resolve()
        else reject(new Error(`chromium exited with ${signal ?? `code ${code}`}:\n${stderr}`))
      })
      timer = setTimeout(() => {
        killAll()
        reject(new Error(`chromium did not finish within ${timeoutMs / 1000} s:\n${stderr}`))
      }, timeoutMs)
    })
    return stdout
  } finally {
    clearTimeout(timer)
    if (chromium.pid !== undefined) killAll()
    rmSync(profile, { recursive: true, force: true, maxRetries: 5 })
  }
}
