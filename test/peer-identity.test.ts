/**
 * Who a client is, asked of the kernel (lib/addon/peer-identity.ts, lib/native/peer.c), over real
 * sockets with real clients: processes running as another local user (test/helpers/local-user.ts),
 * as root, in another network namespace; and the access check of `new MappedRange(..., peer)`
 * over real objects of several owners and modes, judged against the kernel's own answer to a
 * process of that user.
 */
import { execFile, execFileSync } from 'node:child_process'
import { chmodSync, chownSync, closeSync, openSync, readFileSync, statSync } from 'node:fs'
import net from 'node:net'
import path from 'node:path'
import { promisify } from 'node:util'
import t, { type Test } from 'tap'
import type { PeerIdentity } from '../types'
import { peerOfAddresses, peerOfSocket, tcpPeer, unixPeer, UserGroupCache, userGroups } from '../lib/addon/peer-identity'
import { nativeAddon } from '../lib/addon/native-addon'
import { MappedRange } from '../lib/addon/posix-shm'
import { cannotCheckHere } from './helpers/ci'
import { type LocalUser, lookUpUser, peerUser } from './helpers/local-user'
import { fdsOf } from './helpers/observe'
import {
  acceptingServer, endsOf, noIpv6Loopback, noNetworkNamespaces, otherNamespace, plainNode, sharedScratch, startClient, writeClientScript
} from './helpers/peer-clients'
import { makeObject, mappingsOf, objectPath, openFdCount, PAGE_SIZE, throwsShm } from './helpers/shm'
import { bounded } from './helpers/sync'

const run = promisify(execFile)
const isRoot = process.getuid?.() === 0
const thisUser = lookUpUser(execFileSync('id', ['-un'], { encoding: 'utf8' }).trim()) as LocalUser

const identityOf = (user: LocalUser): PeerIdentity => ({ uid: user.uid, gids: user.gids })

t.test('userGroups reads the user database as `id -G` does; an unknown uid has none', async (t) => {
  t.same(userGroups(thisUser.uid), thisUser.gids, `this user (${thisUser.name})`)
  const root = lookUpUser('root') as LocalUser
  t.same(userGroups(0), root.gids, 'root')
  const unknown = 4_000_000_000
  t.throws(() => execFileSync('getent', ['passwd', String(unknown)], { stdio: 'ignore' }), 'the uid really has no entry')
  t.same(userGroups(unknown), [], 'an unknown uid: no groups, not even a primary one')
})

t.test('the client of a TCP connection from this process is this user, over IPv4, IPv6 and IPv4-mapped', async (t) => {
  const cases: Array<[label: string, listen: string, connect: string]> = [
    ['IPv4', '127.0.0.1', '127.0.0.1'], ['IPv6', '::1', '::1'], ['IPv4-mapped', '::', '127.0.0.1']
  ]
  for (const [label, listen, connect] of cases) {
    if (listen === '::1' && noIpv6Loopback() !== undefined) {
      cannotCheckHere(t, `${label}: a client over IPv6`, noIpv6Loopback() as string)
      continue
    }
    const { port, nextConnection } = await acceptingServer(t, { host: listen, port: 0 })
    const accepted = nextConnection()
    const client = net.connect({ host: connect, port })
    t.teardown(() => { client.destroy() })
    const socket = await accepted
    if (label === 'IPv4-mapped') t.match(socket.remoteAddress, /^::ffff:127\.0\.0\.1$/, `${label}: the server sees a mapped address`)
    const expected = identityOf(thisUser)
    t.same(peerOfSocket(socket), expected, `${label}: peerOfSocket`)
    t.same(peerOfAddresses(endsOf(socket)), expected, `${label}: peerOfAddresses`)
    t.equal(tcpPeer(endsOf(socket))?.uid, thisUser.uid, `${label}: tcpPeer's uid`)
    t.not(tcpPeer(endsOf(socket))?.inode, 0, `${label}: and the socket's inode`)
  }
})

/** Resolves once the client's socket of the connection with these ends (IPv4) is in TIME_WAIT, as
 * /proc/net/tcp lists it: the kernel moves it there as the server's FIN arrives, after `end()`. */
async function inTimeWait (ends: ReturnType<typeof endsOf>): Promise<void> {
  const hex = (address: string, port: number) =>
    `${Buffer.from(address.split('.').map(Number)).readUInt32LE().toString(16).toUpperCase().padStart(8, '0')}:` +
    port.toString(16).toUpperCase().padStart(4, '0')
  const client = `${hex(ends.remoteAddress, ends.remotePort)} ${hex(ends.localAddress, ends.localPort)} 06 `
  await bounded((async () => {
    while (!readFileSync('/proc/net/tcp', 'utf8').includes(client)) await new Promise((resolve) => setTimeout(resolve, 10))
  })(), 'the client\'s socket to be in time-wait')
}

t.test('a connection no process holds the client end of has no peer: closed, or never there', async (t) => {
  const { port, nextConnection } = await acceptingServer(t, { host: '127.0.0.1', port: 0 })
  const accepted = nextConnection()
  const client = net.connect({ host: '127.0.0.1', port })
  const socket = await accepted
  const ends = endsOf(socket)
  t.ok(peerOfAddresses(ends), 'found while the client holds its socket')
  const ended = new Promise((resolve) => socket.once('end', resolve))
  socket.resume()
  client.destroy()
  await ended
  // The client's socket now closes without its process (time-wait or orphaned): the kernel
  // answers for such a socket with uid 0, which must never be taken for root.
  t.equal(peerOfAddresses(ends), undefined, 'a client that closed its socket has no peer')
  t.equal(tcpPeer(ends), undefined)
  socket.end()
  await inTimeWait(ends)
  t.equal(peerOfAddresses(ends), undefined, 'nor once the server closed too: time-wait, for which the kernel answers uid 0')
  t.equal(peerOfAddresses({ ...ends, remotePort: ends.remotePort === 65535 ? 65534 : ends.remotePort + 1 }), undefined,
    'a port no socket has')
  t.equal(peerOfAddresses({ ...ends, localAddress: 'fe80::1%lo', remoteAddress: 'fe80::2%lo' }), undefined,
    'link-local addresses with a zone are not looked up')
  t.equal(peerOfAddresses({ ...ends, localAddress: 'fe80::1', remoteAddress: 'fe80::2%lo' }), undefined)
  for (const address of [42, null, 'nonsense']) {
    t.throws(() => peerOfAddresses({ ...ends, remoteAddress: address as string }), { code: 'ERR_INVALID_ARG' },
      `peerOfAddresses refuses the remote address ${String(address)}`)
  }
  t.equal(peerOfSocket(new net.Socket()), undefined, 'a socket that never connected')
  socket.destroy()
  t.equal(peerOfSocket(socket), undefined, 'the server\'s socket, destroyed since')
})

t.test('the client of a Unix domain socket is found by SO_PEERCRED', async (t) => {
  const directory = sharedScratch(t, 'unix')
  const socketPath = path.join(directory, 'server.sock')
  const { nextConnection } = await acceptingServer(t, { path: socketPath })
  const accepted = nextConnection()
  const client = net.connect(socketPath)
  t.teardown(() => { client.destroy() })
  const socket = await accepted
  t.same(peerOfSocket(socket), identityOf(thisUser), 'this user, with its groups')
  const fd = (socket as unknown as { _handle: { fd: number } })._handle.fd
  t.same(unixPeer(fd), { uid: thisUser.uid, gid: process.getgid?.(), pid: process.pid }, 'unixPeer: uid, gid and pid')

  // A socket whose connect failed has a descriptor and no peer until its error is handled.
  const failed = net.connect(path.join(directory, 'missing.sock'))
  const failure = new Promise((resolve) => failed.once('error', resolve))
  t.equal(peerOfSocket(failed), undefined, 'a Unix socket with no peer')
  await failure
  t.equal(peerOfSocket(failed), undefined, 'and once it is closed')
})

t.test('clients running as another user are that user, with its groups', async (t) => {
  const user = peerUser(t, 'clients running as another user')
  if (user === undefined) return
  const directory = sharedScratch(t, 'peer-user')
  const script = writeClientScript(directory)
  const expected = identityOf(user)
  const runAs = { uid: user.uid, gid: user.gid }
  const cases: Array<[label: string, listen: string, connect: string]> = [
    ['IPv4', '127.0.0.1', '127.0.0.1'], ['IPv6', '::1', '::1'], ['IPv4-mapped', '::', '127.0.0.1']
  ]
  for (const [label, listen, connect] of cases) {
    if (listen === '::1' && noIpv6Loopback() !== undefined) {
      cannotCheckHere(t, `${label}: a client of another user over IPv6`, noIpv6Loopback() as string)
      continue
    }
    const { port, nextConnection } = await acceptingServer(t, { host: listen, port: 0 })
    const accepted = nextConnection()
    const client = await startClient(t, script, [connect, String(port)], runAs)
    const socket = await accepted
    t.equal(client.uid, user.uid, `${label}: the client runs as ${user.name}`)
    t.same(peerOfSocket(socket), expected, `${label}: peerOfSocket`)
    t.same(peerOfAddresses(endsOf(socket)), expected, `${label}: peerOfAddresses`)
    t.same(tcpPeer(endsOf(socket)), { uid: user.uid, inode: client.inode }, `${label}: the very socket the client holds`)
  }

  const socketPath = path.join(directory, 'server.sock')
  const { nextConnection } = await acceptingServer(t, { path: socketPath })
  chmodSync(socketPath, 0o777) // connecting needs write permission on the socket file
  const accepted = nextConnection()
  const client = await startClient(t, script, [socketPath], runAs)
  const socket = await accepted
  t.same(peerOfSocket(socket), expected, 'a Unix domain socket: peerOfSocket')
  const fd = (socket as unknown as { _handle: { fd: number } })._handle.fd
  t.same(unixPeer(fd), { uid: user.uid, gid: user.gid, pid: client.pid }, 'unixPeer: the client process')
})

t.test('a client running as root is root, with root\'s groups', async (t) => {
  if (!isRoot) {
    cannotCheckHere(t, 'a client running as root', 'the tests do not run as root')
    return
  }
  const script = writeClientScript(sharedScratch(t, 'root-client'))
  const { port, nextConnection } = await acceptingServer(t, { host: '127.0.0.1', port: 0 })
  const accepted = nextConnection()
  const client = await startClient(t, script, ['127.0.0.1', String(port)], { uid: 0, gid: 0 })
  const socket = await accepted
  t.equal(client.uid, 0)
  t.same(peerOfSocket(socket), identityOf(lookUpUser('root') as LocalUser), 'uid 0 and root\'s groups')
})

t.test('a client in another network namespace is not found, even from a port this host listens on', async (t) => {
  const check = 'a client in another network namespace'
  const missing = noNetworkNamespaces()
  if (missing !== undefined) {
    cannotCheckHere(t, check, missing)
    return
  }
  let namespace
  try {
    namespace = otherNamespace(t)
  } catch (error) {
    cannotCheckHere(t, check, (error as Error).message)
    return
  }
  const script = writeClientScript(sharedScratch(t, 'netns'))
  const { port, nextConnection } = await acceptingServer(t, { host: namespace.hostAddress, port: 0 })

  const accepted = nextConnection()
  await startClient(t, script, [namespace.hostAddress, String(port)], { prefix: namespace.exec })
  const socket = await accepted
  t.equal(socket.remoteAddress, namespace.peerAddress, 'the client comes through the veth pair')
  t.equal(peerOfSocket(socket), undefined, 'peerOfSocket: no such socket here')
  t.equal(peerOfAddresses(endsOf(socket)), undefined, 'peerOfAddresses: no such socket here')

  // The kernel's lookup of one socket falls back to a listener on the asked source port when no
  // connection matches: a client that connects from the port of a listener of this host (sshd's
  // 22, say, owned by root) would be answered with that listener's owner.
  const decoy = await acceptingServer(t, { host: '0.0.0.0', port: 0 })
  const fromDecoyPort = nextConnection()
  await startClient(t, script, [namespace.hostAddress, String(port), String(decoy.port)], { prefix: namespace.exec })
  const impostor = await fromDecoyPort
  t.equal(impostor.remotePort, decoy.port, 'the client connects from the port a listener of this host has')
  t.equal(peerOfSocket(impostor), undefined, 'and is still not found: a listener is not the client')
  t.equal(tcpPeer(endsOf(impostor)), undefined)
})

/** Whether a process running as `user` can open each path read-write: the kernel's answer. */
async function kernelAnswers (user: LocalUser, paths: string[]): Promise<boolean[]> {
  const script = `const fs = require('node:fs')
    process.stdout.write(JSON.stringify(JSON.parse(process.argv[1]).map((file) => {
      try { fs.closeSync(fs.openSync(file, 'r+')); return true } catch (error) { if (error.code === 'EACCES') return false; throw error }
    })))`
  const [command, ...args] = plainNode(['-e', script, JSON.stringify(paths)])
  const { stdout } = await run(command, args,
    { uid: user.uid, gid: user.gid, cwd: '/', env: { PATH: process.env.PATH } })
  return JSON.parse(stdout) as boolean[]
}

/** Maps with `peer` where the rule allows it, or checks the refusal left nothing behind. */
function mapsOrIsDenied (t: Test, key: string, peer: PeerIdentity, allowed: boolean, label: string) {
  const fds = openFdCount()
  if (allowed) {
    const range = new MappedRange(key, 0, PAGE_SIZE, peer)
    t.equal(mappingsOf(key).length, 1, `${label}: mapped`)
    t.ok(range.unmap())
    return
  }
  throwsShm(t, () => new MappedRange(key, 0, PAGE_SIZE, peer), 'ERR_SHM_PEER_DENIED', undefined, `${label}: refused`)
  t.equal(fdsOf(key), 0, `${label}: no descriptor left on the object`)
  t.equal(openFdCount(), fds, `${label}: no descriptor left at all`)
  t.same(mappingsOf(key), [], `${label}: nothing mapped`)
}

t.test('a peer may map an object only as access(2) would let that user open it read-write', async (t) => {
  const user = peerUser(t, 'the access check for another user')
  if (user === undefined) return
  if (!isRoot) {
    cannotCheckHere(t, 'the access check for objects of other owners', 'the tests do not run as root: no chown to another user')
    return
  }
  const root = 0
  const cases: Array<[label: string, mode: number, owner: number, group: number, allowed: boolean]> = [
    ['0600 of root', 0o600, root, root, false],
    ['0644 of root', 0o644, root, root, false],
    ['0660 of root, of a group the peer is in', 0o660, root, user.gid, true],
    ['0660 of root, of a group the peer is not in', 0o660, root, root, false],
    ['0606 of root, of a group the peer is in: the group\'s bits decide', 0o606, root, user.gid, false],
    ['0666 of root', 0o666, root, root, true],
    ['0000 of root', 0o000, root, root, false],
    ['0600 of the peer', 0o600, user.uid, user.gid, true],
    ['0066 of the peer: the owner\'s bits decide', 0o066, user.uid, root, false],
    ['0400 of the peer: no write', 0o400, user.uid, user.gid, false],
    ['0200 of the peer: no read', 0o200, user.uid, user.gid, false]
  ]
  const keys = cases.map(([label, mode, owner, group]) => {
    const key = makeObject(t, PAGE_SIZE, 'access')
    chownSync(objectPath(key), owner, group)
    chmodSync(objectPath(key), mode)
    t.equal(statSync(objectPath(key)).mode & 0o777, mode, `${label}: made`)
    return key
  })
  const kernel = await kernelAnswers(user, keys.map(objectPath))
  cases.forEach(([label, , , , allowed], index) => {
    t.equal(kernel[index], allowed, `${label}: the kernel ${allowed ? 'lets' : 'does not let'} ${user.name} open it read-write`)
    mapsOrIsDenied(t, keys[index], identityOf(user), kernel[index], label)
    mapsOrIsDenied(t, keys[index], { uid: 0, gids: [] }, true, `${label}, for root`)
    closeSync(openSync(objectPath(keys[index]), 'r+')) // and root (this process) can indeed
  })
})

t.test('the rule by the numbers: owner, group (any of the gids), others, root', async (t) => {
  const key = makeObject(t, PAGE_SIZE, 'rule')
  // The object's owner must not be root, whose uid may open anything: as root, give it away.
  if (isRoot) chownSync(objectPath(key), 54321, 54321)
  const { uid: owner, gid: group } = statSync(objectPath(key))
  const other = owner + 1
  type Case = [mode: number, peer: PeerIdentity, allowed: boolean, why: string]
  const cases: Case[] = [
    [0o600, { uid: owner, gids: [] }, true, 'the owner'],
    [0o600, { uid: other, gids: [group] }, false, 'a member of its group'],
    [0o600, { uid: 0, gids: [] }, true, 'root'],
    [0o660, { uid: other, gids: [7, 8, group] }, true, 'a member of its group, not first of the gids'],
    [0o660, { uid: other, gids: [7, 8] }, false, 'another user of other groups'],
    [0o606, { uid: other, gids: [group] }, false, 'a member of its group, where only others may'],
    [0o606, { uid: other, gids: [] }, true, 'another user, where others may'],
    // This process maps too: unless root, it needs the owner's read and write itself.
    ...isRoot ? [[0o066, { uid: owner, gids: [group] }, false, 'the owner, where only group and others may'] satisfies Case] : [],
    [0o640, { uid: other, gids: [group] }, false, 'a member of its group, which may only read'],
    [0o666, { uid: other, gids: [] }, true, 'anyone']
  ]
  for (const [mode, peer, allowed, why] of cases) {
    chmodSync(objectPath(key), mode)
    mapsOrIsDenied(t, key, peer, allowed, `${mode.toString(8).padStart(4, '0')}, ${why}`)
  }
  chmodSync(objectPath(key), 0o600)
  const range = new MappedRange(key, 0, PAGE_SIZE)
  t.ok(range.unmap(), 'without a peer, the server maps as itself')
})

t.test('invalid arguments are refused with ERR_INVALID_ARG, never a crash', async (t) => {
  const key = makeObject(t, PAGE_SIZE, 'peer_args')
  const { port, nextConnection } = await acceptingServer(t, { host: '127.0.0.1', port: 0 })
  const accepted = nextConnection()
  const client = net.connect({ host: '127.0.0.1', port })
  t.teardown(() => { client.destroy() })
  const tcpFd = (await accepted as unknown as { _handle: { fd: number } })._handle.fd
  const fds = openFdCount()
  const ends = { localAddress: '127.0.0.1', localPort: 8000, remoteAddress: '127.0.0.1', remotePort: 40000 }
  const invalid = (operation: () => unknown, label: string) => throwsShm(t, operation, 'ERR_INVALID_ARG', undefined, label)
  const longestIpv6 = 'ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255' // 45 characters: INET6_ADDRSTRLEN - 1
  t.equal(tcpPeer({ ...ends, remoteAddress: longestIpv6, localAddress: '::1' }), undefined, 'the longest address is read')
  const addresses: unknown[] = [
    '', 'localhost', '1.2.3', '1.2.3.4.5', '256.0.0.1', '::g', ' 127.0.0.1', '127.0.0.1 ', '127.0.0.1\0', '127.0.0.1\0.5',
    'fe80::1%lo', '::ffff:127.0.0.1%lo', 'a'.repeat(1000), `${longestIpv6}é`, `${longestIpv6}1`,
    42, null, undefined, {}, ['127.0.0.1'], { toString: () => '127.0.0.1' }
  ]
  for (const address of addresses) {
    invalid(() => tcpPeer({ ...ends, localAddress: address as string }), `local address ${JSON.stringify(address)}`)
    invalid(() => tcpPeer({ ...ends, remoteAddress: address as string }), `remote address ${JSON.stringify(address)}`)
  }
  for (const port of [0, -1, 65536, 2 ** 32 + 80, 1.5, Number.NaN, Infinity, -Infinity, '80', 80n, null, undefined, {}]) {
    invalid(() => tcpPeer({ ...ends, localPort: port as number }), `local port ${String(port)}`)
    invalid(() => tcpPeer({ ...ends, remotePort: port as number }), `remote port ${String(port)}`)
  }
  invalid(() => tcpPeer({ ...ends, remoteAddress: '::1' }), 'one address IPv4, the other IPv6')
  t.equal(tcpPeer({ ...ends, localAddress: '::ffff:127.0.0.1' }), undefined, 'an IPv4-mapped address goes with an IPv4 one')
  const native = nativeAddon as Record<string, (...args: unknown[]) => unknown>
  t.throws(() => native.tcpPeer('127.0.0.1', 1, '127.0.0.1'), { code: 'ERR_INVALID_ARG' }, 'tcpPeer with three arguments')
  t.throws(() => native.unixPeer(), { code: 'ERR_INVALID_ARG' }, 'unixPeer without an fd')
  t.throws(() => native.userGroups(), { code: 'ERR_INVALID_ARG' }, 'userGroups without a uid')

  for (const fd of [-1, 1.5, Number.NaN, 2 ** 31, '3', null, undefined]) invalid(() => unixPeer(fd as number), `fd ${String(fd)}`)
  const file = openSync(__filename, 'r')
  try {
    throwsShm(t, () => unixPeer(file), 'ENOTSOCK', 'getsockopt', 'an fd that is no socket')
  } finally {
    closeSync(file)
  }
  throwsShm(t, () => unixPeer(2 ** 31 - 1), 'EBADF', 'getsockopt', 'an fd that is not open')
  invalid(() => unixPeer(tcpFd), 'a TCP socket is not a Unix domain socket')

  for (const uid of [-1, 2 ** 32 - 1, 2 ** 32, 1.5, Number.NaN, '0', null, undefined]) {
    invalid(() => userGroups(uid as number), `userGroups of ${String(uid)}`)
  }

  const peers: unknown[] = [
    null, 0, 'root', [], {}, { uid: 0 }, { gids: [] }, { uid: -1, gids: [] }, { uid: 1.5, gids: [] }, { uid: 2 ** 32 - 1, gids: [] },
    { uid: '0', gids: [] }, { uid: 0, gids: 'x' }, { uid: 0, gids: { length: 1, 0: 0 } }, { uid: 1, gids: [-1] }, { uid: 1, gids: [1, 'x'] },
    { uid: 1, gids: [1, 2 ** 32] }, { uid: 1, gids: new Array(65_538).fill(1) }, { uid: 1, gids: [1, , 2] } // eslint-disable-line no-sparse-arrays
  ]
  for (const peer of peers) {
    invalid(() => new MappedRange(key, 0, PAGE_SIZE, peer as PeerIdentity), `peer ${JSON.stringify(peer)?.slice(0, 40)}`)
  }
  t.throws(() => new MappedRange(key, 0, PAGE_SIZE, { get uid (): number { throw new Error('a getter throws') }, gids: [] }),
    /a getter throws/, 'a peer whose getter throws: its error')
  const large = new Array(65_537).fill(1)
  const range = new MappedRange(key, 0, PAGE_SIZE, { uid: 0, gids: large })
  t.ok(range.unmap(), 'as many gids as a process can have are read')
  t.same(mappingsOf(key), [], 'nothing left mapped')
  t.equal(openFdCount(), fds, 'no descriptor left open')
})

t.test('UserGroupCache reads a uid\'s groups once per maxAgeMs, and each caller gets its own copy', async (t) => {
  let now = 1000
  const reads: number[] = []
  const cache = new UserGroupCache({ maxAgeMs: 500, now: () => now }, (uid) => {
    reads.push(uid)
    return [uid, uid + 1]
  })
  t.same(cache.groupsOf(7), [7, 8])
  const copy = cache.groupsOf(7)
  copy.push(99)
  t.same(cache.groupsOf(7), [7, 8], 'a caller changing its copy changes nothing kept')
  t.same(reads, [7], 'read once')
  now += 499
  cache.groupsOf(7)
  t.same(reads, [7], 'still fresh just before maxAgeMs')
  now += 1
  cache.groupsOf(7)
  t.same(reads, [7, 7], 'read again once maxAgeMs has passed')
  now -= 10_000
  cache.groupsOf(7)
  t.same(reads, [7, 7, 7], 'read again if the clock went back')
  cache.groupsOf(8)
  t.same(reads, [7, 7, 7, 8], 'each uid its own')

  for (let uid = 100; uid < 100 + 5000; uid++) cache.groupsOf(uid)
  reads.length = 0
  cache.groupsOf(100 + 4999)
  t.same(reads, [], 'the latest uids are kept')
  cache.groupsOf(100)
  t.same(reads, [100], 'the kept users are bounded: the earliest went')

  const real = new UserGroupCache()
  t.same(real.groupsOf(thisUser.uid), thisUser.gids, 'by default, the user database')
  t.same(peerOfAddresses({ localAddress: '127.0.0.1', localPort: 1, remoteAddress: '127.0.0.1', remotePort: 2 }, real.groupsOf), undefined)
})
