/**
 * The peer check a register will pay: finding the client of one TCP connection
 * (lib/addon/peer-identity.ts: the kernel's sock_diag answer for the connection's exact 4-tuple)
 * and that user's groups. Measured with no other connection open, and with `connections` other
 * TCP connections open on the machine (held by child processes, so this process's descriptor
 * limit does not matter); beside it, for context, reading and searching /proc/net/tcp once, the
 * way that lists every socket. Batches of every kind alternate; each figure is the median of its
 * batches.
 *
 * Alone: `npx tsx bench/peer-check.ts [--quick]`.
 */
import { execFileSync, spawn, type ChildProcessWithoutNullStreams } from 'node:child_process'
import { once } from 'node:events'
import { readFileSync } from 'node:fs'
import net from 'node:net'
import { createInterface } from 'node:readline'
import { peerOfAddresses, tcpPeer, UserGroupCache, userGroups } from '../lib/addon/peer-identity'
import { num, progress, table } from './format'
import { median, nsPerCall, round } from './stats'

export interface PeerCheckPlan {
  /** Other TCP connections open for the loaded measurement. */
  connections: number
  batches: number
  /** Seconds one batch of one kind should take (the iteration count is calibrated to it). */
  batchSeconds: number
}

/** Microseconds per call of each kind. */
export interface PeerCheckCosts {
  /** tcpPeer: the kernel's answer for the 4-tuple. */
  lookupUs: number
  /** userGroups: getpwuid_r + getgrouplist. */
  groupsUs: number
  /** peerOfAddresses reading the groups each time. */
  checkUs: number
  /** peerOfAddresses with a UserGroupCache: what a register pays. */
  checkCachedUs: number
  /** /proc/net/tcp read and searched for the connection's line once. */
  procNetTcpUs: number
}

export interface PeerCheckResult {
  connections: number
  /** Sockets /proc/net/tcp listed before the connections were opened. */
  idleSocketsListed: number
  /** Sockets /proc/net/tcp listed with the connections open (each has two ends, and listeners). */
  socketsListed: number
  idle: PeerCheckCosts
  loaded: PeerCheckCosts
}

const MIN_ITERATIONS = 3
const MAX_ITERATIONS = 200_000
const WARM_UP_SECONDS = 0.2

/** A child process that opens `count` connections to a listener of its own, holds them until
 * its stdin ends, and says `ready` once both ends of every one are open. Plain JS, run with `-e`. */
const HOLDER = `'use strict'
const net = require('node:net')
const count = Number(process.argv[1])
const sockets = []
let accepted = 0
const server = net.createServer((socket) => { sockets.push(socket); if (++accepted === count) process.stdout.write('ready\\n') })
server.listen({ host: '127.0.0.1', port: 0, backlog: 4096 }, async () => {
  const { port } = server.address()
  // In waves, so that the listen queue never overflows (a SYN dropped waits a second).
  for (let opened = 0; opened < count;) {
    const wave = Math.min(256, count - opened)
    await Promise.all(Array.from({ length: wave }, () => new Promise((resolve, reject) => {
      const socket = net.connect({ host: '127.0.0.1', port }, resolve).on('error', reject)
      sockets.push(socket)
    })))
    opened += wave
  }
})
// Reset, not closed: a closed connection would leave its socket in time-wait for a minute, listed
// by /proc/net/tcp and slowing the next run's "no other connections" figures.
process.stdin.on('end', () => {
  for (const socket of sockets) socket.resetAndDestroy()
  setImmediate(() => process.exit(0))
}).resume()
`

/** The descriptors one child may open: its hard limit, which `ulimit -n` raises it to. */
function descriptorLimit (): number {
  const hard = execFileSync('sh', ['-c', 'ulimit -Hn'], { encoding: 'utf8' }).trim()
  return hard === 'unlimited' ? 1 << 20 : Number(hard)
}

/** Child processes holding `count` connections in all (two descriptors each, and a few spare). */
async function holdConnections (count: number): Promise<ChildProcessWithoutNullStreams[]> {
  const limit = Math.min(descriptorLimit(), 1 << 20)
  const perChild = Math.max(1, Math.floor((limit - 100) / 2))
  const children: ChildProcessWithoutNullStreams[] = []
  try {
    for (let held = 0; held < count; held += perChild) {
      const share = Math.min(perChild, count - held)
      const child = spawn('sh', ['-c', `ulimit -n ${limit} && exec "$0" "$@"`, process.execPath, '-e', HOLDER, String(share)],
        { env: { ...process.env, NODE_OPTIONS: '' } })
      children.push(child)
      child.stderr.pipe(process.stderr)
      const [line] = await Promise.race([
        once(createInterface({ input: child.stdout }), 'line'),
        once(child, 'exit').then(([code]) => { throw new Error(`a connection holder exited (${code}) before it was ready`) })
      ]) as [string]
      if (line !== 'ready') throw new Error(`a connection holder said ${line}`)
    }
    return children
  } catch (error) {
    await release(children)
    throw error
  }
}

async function release (children: ChildProcessWithoutNullStreams[]): Promise<void> {
  await Promise.all(children.map(async (child) => {
    if (child.exitCode !== null || child.signalCode !== null) return
    const exited = once(child, 'exit')
    child.stdin.end()
    await exited
  }))
}

/** One connection of this process to itself: the one whose peer is looked up. */
async function ownConnection () {
  const server = net.createServer()
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const accepted = once(server, 'connection')
  const client = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1')
  const [socket] = await accepted as [net.Socket]
  const ends = {
    localAddress: socket.localAddress as string,
    localPort: socket.localPort as number,
    remoteAddress: socket.remoteAddress as string,
    remotePort: socket.remotePort as number
  }
  const close = async () => {
    client.destroy()
    socket.destroy()
    await new Promise((resolve) => server.close(resolve))
  }
  return { ends, close }
}

/** The line /proc/net/tcp gives the client's socket of the connection (addresses as the kernel
 * prints them: the 32-bit value in host order, then the port, in hex). */
function procNetTcpNeedle (ends: { localAddress: string, localPort: number, remoteAddress: string, remotePort: number }): string {
  const hex = (address: string, port: number) =>
    `${Buffer.from(address.split('.').map(Number)).readUInt32LE().toString(16).toUpperCase().padStart(8, '0')}:` +
    port.toString(16).toUpperCase().padStart(4, '0')
  return `${hex(ends.remoteAddress, ends.remotePort)} ${hex(ends.localAddress, ends.localPort)} `
}

/** The uid of the socket /proc/net/tcp lists with these addresses, found as a reader of it would. */
function uidFromProcNetTcp (needle: string): number {
  const listing = readFileSync('/proc/net/tcp', 'latin1')
  const at = listing.indexOf(needle)
  if (at < 0) throw new Error('the connection is not in /proc/net/tcp')
  // sl local rem st tx:rx tr:when retrnsmt uid ...
  return Number(listing.slice(at, listing.indexOf('\n', at)).trim().split(/\s+/)[6])
}

const callsIn = (seconds: number, ns: number) =>
  Math.round(Math.min(MAX_ITERATIONS, Math.max(MIN_ITERATIONS, seconds * 1e9 / ns)))

async function measure (plan: PeerCheckPlan): Promise<PeerCheckCosts> {
  const connection = await ownConnection()
  try {
    const { ends } = connection
    const uid = process.getuid?.() ?? 0
    const cache = new UserGroupCache()
    const needle = procNetTcpNeedle(ends)
    let seen = 0
    const kinds: Record<keyof PeerCheckCosts, () => void> = {
      lookupUs: () => { seen += tcpPeer(ends)?.uid === uid ? 1 : 0 },
      groupsUs: () => { seen += userGroups(uid).length > 0 ? 1 : 0 },
      checkUs: () => { seen += peerOfAddresses(ends)?.uid === uid ? 1 : 0 },
      checkCachedUs: () => { seen += peerOfAddresses(ends, cache.groupsOf)?.uid === uid ? 1 : 0 },
      procNetTcpUs: () => { seen += uidFromProcNetTcp(needle) === uid ? 1 : 0 }
    }
    const names = Object.keys(kinds) as Array<keyof PeerCheckCosts>
    const iterations = names.map((name) => {
      // Warm-up: the JIT's optimised code and the kernel's caches are in place before any timing.
      nsPerCall(callsIn(WARM_UP_SECONDS, nsPerCall(MIN_ITERATIONS, kinds[name])), kinds[name])
      return callsIn(plan.batchSeconds, nsPerCall(MIN_ITERATIONS, kinds[name]))
    })
    const samples = names.map((): number[] => [])
    seen = 0
    let expected = 0
    for (let batch = 0; batch < plan.batches; batch++) {
      names.forEach((name, index) => {
        samples[index].push(nsPerCall(iterations[index], kinds[name]) / 1000)
        expected += iterations[index]
      })
    }
    if (seen !== expected) throw new Error(`the peer check found the wrong user ${expected - seen} times`)
    return Object.fromEntries(names.map((name, index) => [name, median(samples[index])])) as unknown as PeerCheckCosts
  } finally {
    await connection.close()
  }
}

const socketsListed = () => readFileSync('/proc/net/tcp', 'latin1').split('\n').length - 2

export async function peerCheckSuite (plan: PeerCheckPlan): Promise<PeerCheckResult> {
  const idleSocketsListed = socketsListed()
  const idle = await measure(plan)
  progress(`peer check, no other connections: ${num(idle.checkCachedUs)} µs (groups read each time: ${num(idle.checkUs)} µs)`)
  progress(`opening ${plan.connections} TCP connections from child processes`)
  const holders = await holdConnections(plan.connections)
  try {
    const listed = socketsListed()
    const loaded = await measure(plan)
    progress(`peer check, ${plan.connections} other connections (${listed} sockets listed): ${num(loaded.checkCachedUs)} µs ` +
      `(groups read each time: ${num(loaded.checkUs)} µs; /proc/net/tcp: ${num(loaded.procNetTcpUs)} µs)`)
    return { connections: plan.connections, idleSocketsListed, socketsListed: listed, idle, loaded }
  } finally {
    await release(holders)
  }
}

export function peerCheckTable (result: PeerCheckResult): string {
  const row = (label: string, kind: keyof PeerCheckCosts) => [label, num(result.idle[kind]), num(result.loaded[kind])]
  return table('Peer check: the client of one TCP connection and its groups (µs per call, median of batches)',
    ['step', 'no other connections', `${num(result.connections)} other connections`],
    [row('lookup: sock_diag, the exact 4-tuple (tcpPeer)', 'lookupUs'),
      row('groups: getpwuid_r + getgrouplist (userGroups)', 'groupsUs'),
      row('lookup + groups (peerOfAddresses)', 'checkUs'),
      row('lookup + groups kept by a UserGroupCache: what a register pays', 'checkCachedUs'),
      row('for context: /proc/net/tcp read and searched once', 'procNetTcpUs')],
    [`registerPeerCheckUs: ${num(result.loaded.checkCachedUs)} µs with ${num(result.connections)} other connections open ` +
      `(/proc/net/tcp then listed ${num(result.socketsListed)} sockets: both ends of each, and the listeners; ` +
      `${num(result.idleSocketsListed)} before they were opened).`,
    'The lookup is one netlink request on a new socket, answered from the kernel\'s hash of connections: its cost does not grow with them.',
    'The groups come from the user database (/etc/passwd, /etc/group here); a UserGroupCache reads them once a second per uid.'])
}

/** The figures the bench's final JSON line carries. */
export const peerCheckSummary = (result: PeerCheckResult) => ({
  peerCheckUncachedUs: round(result.loaded.checkUs),
  peerCheckIdleUs: round(result.idle.checkCachedUs),
  peerLookupUs: round(result.loaded.lookupUs),
  peerGroupsUs: round(result.loaded.groupsUs),
  procNetTcpUs: round(result.loaded.procNetTcpUs),
  procNetTcpIdleUs: round(result.idle.procNetTcpUs)
})

async function main () {
  const quick = process.argv.includes('--quick')
  const result = await peerCheckSuite({ connections: 10_000, batches: quick ? 5 : 9, batchSeconds: quick ? 0.05 : 0.2 })
  process.stdout.write(peerCheckTable(result) + '\n')
  process.stdout.write(JSON.stringify({ registerPeerCheckUs: round(result.loaded.checkCachedUs), ...peerCheckSummary(result) }) + '\n')
}

if (require.main === module) {
  main().catch((error) => {
    process.stderr.write(`peer check bench failed: ${(error as Error).stack ?? String(error)}\n`)
    process.exit(1)
  })
}
