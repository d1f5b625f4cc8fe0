/**
 * Real clients for the peer lookups (lib/addon/peer-identity.ts): a server that accepts, and
 * client processes that connect to it and hold their connection, running as another user, as
 * root, or in another network namespace reached through a veth pair. The client is a plain-JS
 * script in a directory every user can read: another user may be unable to read the checkout or
 * its node_modules, so it runs with no loader and none of the test runner's options.
 */
import { type ChildProcessWithoutNullStreams, execFileSync, spawn } from 'node:child_process'
import { once } from 'node:events'
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { networkInterfaces, tmpdir } from 'node:os'
import net from 'node:net'
import path from 'node:path'
import { createInterface } from 'node:readline'
import { randomInt } from 'node:crypto'
import type { Test } from 'tap'
import { onPath } from '../../scripts/toolchains'
import { bounded } from './sync'

/** Connects to argv[2] (a socket path) or argv[2]:argv[3] (from local port argv[4], if given);
 * once connected, prints who it runs as and the inode of its own socket; holds the connection
 * until its stdin ends. */
const CLIENT_SCRIPT = `'use strict'
const fs = require('node:fs')
const net = require('node:net')
const [host, port, localPort] = process.argv.slice(2)
const options = port === undefined
  ? { path: host }
  : { host, port: Number(port), localPort: localPort === undefined ? undefined : Number(localPort) }
const socket = net.connect(options, () => {
  const link = fs.readlinkSync('/proc/self/fd/' + socket._handle.fd)
  const inode = Number(/^socket:\\[(\\d+)\\]$/.exec(link)[1])
  process.stdout.write(JSON.stringify({ uid: process.getuid(), gid: process.getgid(), pid: process.pid, inode }) + '\\n')
})
socket.on('error', (error) => { process.stderr.write(String(error.stack) + '\\n'); process.exit(1) })
process.stdin.on('end', () => process.exit(0)).resume()
`

/**
 * The command that runs `node <args>` as a plain client: the test runner hooks every process the
 * tests spawn, adding its loader from the checkout's node_modules to NODE_OPTIONS, which another
 * user may be unable to read (a checkout under a private home). `env -u` drops it for the client.
 */
export function plainNode (args: string[], prefix: string[] = []): [string, ...string[]] {
  return [...prefix, 'env', '-u', 'NODE_OPTIONS', process.execPath, ...args] as [string, ...string[]]
}

/** A directory every user can read and enter, removed when the test ends. */
export function sharedScratch (t: Test, label: string): string {
  const directory = mkdtempSync(path.join(tmpdir(), `fts-${label}-`))
  chmodSync(directory, 0o755)
  t.teardown(() => rmSync(directory, { recursive: true, force: true }))
  return directory
}

/** The client script, written into `directory`; returns its path. */
export function writeClientScript (directory: string): string {
  const script = path.join(directory, 'client.js')
  writeFileSync(script, CLIENT_SCRIPT, { mode: 0o644 })
  return script
}

/** What a client process says of itself once connected. */
export interface ClientReport {
  uid: number
  gid: number
  pid: number
  /** Its own socket's inode (/proc/self/fd). */
  inode: number
}

export interface RunAs {
  uid?: number
  gid?: number
  /** Put before node (`ip netns exec <name>`). */
  prefix?: string[]
}

/** Starts a client that connects to `target` and holds on; resolves once it has connected. It is
 * ended when the test ends. */
export async function startClient (t: Test, script: string, target: string[], runAs: RunAs = {}): Promise<ClientReport> {
  const [command, ...args] = plainNode([script, ...target], runAs.prefix)
  const child: ChildProcessWithoutNullStreams = spawn(command, args, {
    uid: runAs.uid,
    gid: runAs.gid,
    cwd: path.dirname(script),
    // Nothing of the test runner (NODE_OPTIONS loads its loader from node_modules).
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin' }
  })
  const exited = once(child, 'exit')
  t.teardown(async () => {
    child.stdin.end()
    if (child.exitCode === null && child.signalCode === null) await exited
  })
  let stderr = ''
  child.stderr.on('data', (chunk: Buffer) => { stderr += chunk.toString() })
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]()
  const first = await bounded(lines.next(), `the client ${target.join(' ')} to connect`)
  if (first.done === true) {
    await exited
    throw new Error(`the client ended without connecting: ${stderr}`)
  }
  return JSON.parse(first.value) as ClientReport
}

/** A server listening as `options` say; its connections are destroyed and it closes when the
 * test ends. `nextConnection` resolves with the next socket it accepts. */
export async function acceptingServer (t: Test, options: net.ListenOptions) {
  const server = net.createServer()
  const sockets = new Set<net.Socket>()
  server.on('connection', (socket) => {
    sockets.add(socket)
    socket.on('error', () => {}) // a client killed at teardown resets its connection
  })
  server.listen(options)
  await once(server, 'listening')
  t.teardown(async () => {
    for (const socket of sockets) socket.destroy()
    await new Promise((resolve) => server.close(resolve))
  })
  const address = server.address()
  return {
    server,
    port: typeof address === 'object' && address !== null ? address.port : 0,
    nextConnection: async (): Promise<net.Socket> => (await bounded(once(server, 'connection'), 'a connection'))[0] as net.Socket
  }
}

/** The four ends of an accepted socket, as the server sees them. */
export function endsOf (socket: net.Socket) {
  return {
    localAddress: socket.localAddress as string,
    localPort: socket.localPort as number,
    remoteAddress: socket.remoteAddress as string,
    remotePort: socket.remotePort as number
  }
}

/** Why this machine has no IPv6 loopback to test on, or undefined if it has one. */
export function noIpv6Loopback (): string | undefined {
  const loopback = Object.values(networkInterfaces()).flat().some((address) => address?.internal === true && address.address === '::1')
  return loopback ? undefined : 'this machine has no IPv6 loopback address (::1)'
}

/** A network namespace joined to this one by a veth pair, each end with its own address. */
export interface OtherNamespace {
  name: string
  /** The address of this namespace's end, which the other namespace reaches. */
  hostAddress: string
  /** The address of the other namespace's end: its clients come from there. */
  peerAddress: string
  /** `ip netns exec <name>`: a prefix to run a command in it. */
  exec: string[]
}

const ip = (...args: string[]) => execFileSync('ip', args, { stdio: ['ignore', 'ignore', 'pipe'] })

/** Why another network namespace cannot be made here, or undefined. */
export function noNetworkNamespaces (): string | undefined {
  if (process.getuid?.() !== 0) return 'not root: network namespaces and veth pairs need root (ip netns add)'
  if (!onPath('ip')) return 'no ip command (on Debian or Ubuntu: apt-get install iproute2)'
  return undefined
}

/**
 * Makes a network namespace and a veth pair between it and this one, with a /30 of 198.18.0.0/15
 * (the range set aside for benchmark networks: it routes nowhere) on them; everything is torn
 * down when the test ends, also when making it failed halfway. Throws with ip's message if this
 * machine will not make one (a container without CAP_NET_ADMIN and CAP_SYS_ADMIN).
 */
export function otherNamespace (t: Test): OtherNamespace {
  const tag = `${process.pid % 100000}${randomInt(100)}`
  const name = `fts${tag}`
  const hostEnd = `ftsh${tag}`
  const peerEnd = `ftsn${tag}`
  const subnet = randomInt(256 * 64)
  const address = (host: number) => `198.18.${subnet >> 6}.${(subnet & 63) * 4 + host}`
  t.teardown(() => {
    // Deleting one end deletes the pair; deleting the namespace deletes what is left in it.
    for (const args of [['link', 'del', hostEnd], ['netns', 'del', name]]) {
      try { ip(...args) } catch {}
    }
  })
  try {
    ip('netns', 'add', name)
    ip('link', 'add', hostEnd, 'type', 'veth', 'peer', 'name', peerEnd, 'netns', name)
    ip('addr', 'add', `${address(1)}/30`, 'dev', hostEnd)
    ip('link', 'set', hostEnd, 'up')
    ip('-n', name, 'addr', 'add', `${address(2)}/30`, 'dev', peerEnd)
    ip('-n', name, 'link', 'set', peerEnd, 'up')
  } catch (error) {
    throw new Error(`cannot make a network namespace: ${String((error as { stderr?: Buffer }).stderr ?? error).trim()}`)
  }
  return { name, hostAddress: address(1), peerAddress: address(2), exec: ['ip', 'netns', 'exec', name] }
}
