/**
 * A second local user, `shmpeer`, for checks where a client running as another user is the point
 * (who a client is: lib/addon/peer-identity.ts). Used if it exists; when the tests run as root
 * and `useradd` is on PATH it is created (a system user: no home, no login shell, a group of its
 * own). Otherwise the checks that need it SKIP naming what is missing, and fail in CI
 * (test/helpers/ci.ts), which creates it before the tests (.ci/run).
 */
import { execFileSync, spawnSync } from 'node:child_process'
import type { Test } from 'tap'
import { onPath } from '../../scripts/toolchains'
import { cannotCheckHere } from './ci'
import { plainNode } from './peer-clients'

export const PEER_USER = 'shmpeer'

export const CREATE_PEER_USER = ['useradd', '--system', '--no-create-home', '--shell', '/usr/sbin/nologin', PEER_USER]

export interface LocalUser {
  name: string
  uid: number
  /** Its primary group. */
  gid: number
  /** Every group of the user in the user database (`id -G`), ascending. */
  gids: number[]
}

const idOf = (option: string, name: string): string =>
  execFileSync('id', [option, name], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim()

/** The user named `name`, as the user database knows it; undefined if there is none. */
export function lookUpUser (name: string): LocalUser | undefined {
  try {
    const gids = idOf('-G', name).split(/\s+/).map(Number).sort((a, b) => a - b)
    return { name, uid: Number(idOf('-u', name)), gid: Number(idOf('-g', name)), gids }
  } catch {
    return undefined
  }
}

const pause = (ms: number) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms)

/** Creates the peer user; returns why it cannot be, or undefined once it exists. Another test
 * file may be creating it at the same moment: useradd then finds the name taken, or the user
 * database locked, and it is looked up again. */
function createPeerUser (): string | undefined {
  const remedy = `create it: ${CREATE_PEER_USER.join(' ')}`
  if (process.getuid?.() !== 0) return `no local user ${PEER_USER}, and not root to create one (${remedy})`
  if (!onPath('useradd')) return `no local user ${PEER_USER}, and no useradd to create one (on Debian or Ubuntu: apt-get install passwd)`
  let failure = ''
  for (let attempt = 0; attempt < 10; attempt++) {
    try {
      execFileSync(CREATE_PEER_USER[0], CREATE_PEER_USER.slice(1), { stdio: ['ignore', 'ignore', 'pipe'] })
      return undefined
    } catch (error) {
      if (lookUpUser(PEER_USER) !== undefined) return undefined
      failure = String((error as { stderr?: Buffer }).stderr ?? error).trim()
      pause(100)
    }
  }
  return `no local user ${PEER_USER}, and ${CREATE_PEER_USER.join(' ')} failed: ${failure}`
}

/** The second local user, created if need be, as whom these tests can run processes (as root,
 * or as that user itself); undefined after a SKIP (a failure in CI) of `check`, saying what is
 * missing. */
export function peerUser (t: Test, check: string): LocalUser | undefined {
  const missing = lookUpUser(PEER_USER) === undefined ? createPeerUser() : undefined
  const user = lookUpUser(PEER_USER)
  const why = missing ?? (user === undefined ? `no local user ${PEER_USER}` : whyNotRunAs(user))
  if (why === undefined) return user
  cannotCheckHere(t, check, why)
  return undefined
}

/** Why this process cannot run a Node client as `user`, or undefined if it can. */
function whyNotRunAs (user: LocalUser): string | undefined {
  const uid = process.getuid?.()
  if (uid !== 0 && uid !== user.uid) return `not root: cannot run a process as ${PEER_USER}`
  const [command, ...args] = plainNode(['-e', ''])
  const result = spawnSync(command, args, { uid: user.uid, gid: user.gid, cwd: '/', encoding: 'utf8', env: { PATH: process.env.PATH } })
  if (result.status === 0) return undefined
  return `${user.name} cannot run this Node (${process.execPath}): ${(result.stderr || result.error?.message || '').trim()}`
}
