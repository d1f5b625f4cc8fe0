/**
 * The typed face of the addon's peer lookups (lib/native/peer.c): who the client of a connection
 * is, as the kernel knows it, never as anything the client sends says.
 *
 * - TCP: the kernel is asked (NETLINK_SOCK_DIAG, no privilege needed) for the one socket whose
 *   ends are this connection's, reversed: the client's own socket. Its uid is the user that
 *   created it. A client on another host, in another network namespace (a container with its own
 *   network), or behind a proxy has no such socket here: no identity (undefined). So does a
 *   client that has closed its socket already (the kernel keeps no user for a closing socket).
 * - Unix domain sockets: SO_PEERCRED, the credentials the client process had when it connected.
 *
 * The groups are the user's in the user database (getgrouplist, as login sets them), not those a
 * process of that user holds now (it may have dropped or been given others).
 *
 * `new MappedRange(key, offset, byteSize, peer)` judges such a peer by the object's owner, group
 * and mode bits alone, as access(2) would without ACLs: an ACL on the object (setfacl on /dev/shm)
 * is not read, nor are capabilities (uid 0 is taken to have CAP_DAC_OVERRIDE, and no other uid is)
 * or security modules.
 */
import type { Socket } from 'node:net'
import { nativeAddon } from './native-addon'
import type { PeerIdentity } from '../../types'
import { callAddon } from './addon-errors'

/** The four ends of an accepted TCP connection, as the server's own socket reports them. */
export interface ConnectionAddresses {
  localAddress: string
  localPort: number
  remoteAddress: string
  remotePort: number
}

/** Where the groups of a uid come from: `userGroups`, or a `UserGroupCache`'s `groupsOf`. */
export type GroupsOf = (uid: number) => number[]

interface Addon {
  tcpPeer (localAddress: string, localPort: number, remoteAddress: string, remotePort: number): { uid: number, inode: number } | undefined
  unixPeer (fd: number): { uid: number, gid: number, pid: number } | undefined
  userGroups (uid: number): number[]
}

const addon = nativeAddon as Addon

const ascendingUnique = (gids: number[]): number[] => [...new Set(gids)].sort((a, b) => a - b)

/** The gids of the user's groups, primary included (the user database, read now); `[]` for a uid
 * with no entry. */
export function userGroups (uid: number): number[] {
  return ascendingUnique(callAddon(() => addon.userGroups(uid)))
}

/**
 * The uid that owns the client's socket of a TCP connection this server accepted, by the
 * connection's four ends as the server sees them (IPv4, IPv6, or IPv4-mapped IPv6 as a dual-stack
 * listener reports them); undefined if no process on this host, in this network namespace, holds
 * that socket. Its `inode` names the socket (/proc/<pid>/fd links read `socket:[inode]`).
 */
export function tcpPeer (addresses: ConnectionAddresses): { uid: number, inode: number } | undefined {
  const { localAddress, localPort, remoteAddress, remotePort } = addresses
  return callAddon(() => addon.tcpPeer(localAddress, localPort, remoteAddress, remotePort))
}

/** The credentials a Unix domain socket's peer had when it connected, by the socket's descriptor;
 * undefined if it has no peer. */
export function unixPeer (fd: number): { uid: number, gid: number, pid: number } | undefined {
  return callAddon(() => addon.unixPeer(fd))
}

const hasZone = (address: unknown) => typeof address === 'string' && address.includes('%')

/** The client of a TCP connection this server accepted, with its groups (see `tcpPeer`). */
export function peerOfAddresses (addresses: ConnectionAddresses, groupsOf: GroupsOf = userGroups): PeerIdentity | undefined {
  // A link-local IPv6 address with its zone (`fe80::1%eth0`): the client's socket is bound to that
  // interface, and the kernel finds such a socket only when asked with it. Not looked up: no identity.
  if (hasZone(addresses.localAddress) || hasZone(addresses.remoteAddress)) return undefined
  const owner = tcpPeer(addresses)
  return owner === undefined ? undefined : { uid: owner.uid, gids: groupsOf(owner.uid) }
}

/** What of a net.Socket the lookups need: its addresses (TCP), or its descriptor (Unix sockets,
 * through Node's own handle: net.Socket does not expose it). */
interface SocketInternals {
  _handle?: { fd?: number, constructor?: { name?: string } } | null
}

/**
 * The client of an accepted connection: a TCP socket by its four ends (`peerOfAddresses`), a Unix
 * domain socket by SO_PEERCRED (its groups and, as the kernel says, the group it ran as when it
 * connected). Undefined when the kernel knows no client for it, or the socket is closed.
 */
export function peerOfSocket (socket: Socket, groupsOf: GroupsOf = userGroups): PeerIdentity | undefined {
  const { localAddress, localPort, remoteAddress, remotePort } = socket
  if (localAddress !== undefined && localPort !== undefined && remoteAddress !== undefined && remotePort !== undefined) {
    return peerOfAddresses({ localAddress, localPort, remoteAddress, remotePort }, groupsOf)
  }
  const handle = (socket as unknown as SocketInternals)._handle
  // Node's handle of a Unix domain socket is a Pipe; a TCP socket without addresses is closed.
  if (handle?.constructor?.name !== 'Pipe' || handle.fd === undefined || handle.fd < 0) return undefined
  const credentials = unixPeer(handle.fd)
  return credentials === undefined
    ? undefined
    : { uid: credentials.uid, gids: ascendingUnique([...groupsOf(credentials.uid), credentials.gid]) }
}

export interface UserGroupCacheOptions {
  /** How long a uid's groups are kept, in milliseconds (default 1000). */
  maxAgeMs?: number
  /** The clock, in milliseconds (default Date.now). */
  now?: () => number
}

/** Kept uids beyond which the cache starts again empty (the users connecting are few). */
const MAX_USERS = 4096

/**
 * The groups of each uid, read from the user database once per `maxAgeMs`. Reading it
 * (getpwuid_r + getgrouplist: /etc/passwd and /etc/group, or NSS) costs about 15 µs on a small
 * machine, more than the kernel's answer for a connection's peer (bench/peer-check.ts), and a
 * remote database (LDAP, sssd) costs far more. Membership changes are rare: a user taken out of a
 * group keeps it here for up to `maxAgeMs` more (its running processes keep it until they end).
 * One cache per registry, never shared between instances.
 */
export class UserGroupCache {
  readonly #maxAgeMs: number
  readonly #now: () => number
  readonly #read: GroupsOf
  readonly #entries = new Map<number, { gids: number[], readAt: number }>()

  constructor (options: UserGroupCacheOptions = {}, read: GroupsOf = userGroups) {
    this.#maxAgeMs = options.maxAgeMs ?? 1000
    this.#now = options.now ?? Date.now
    this.#read = read
  }

  /** The uid's groups (a copy: the caller may keep or change it). */
  readonly groupsOf = (uid: number): number[] => {
    const now = this.#now()
    let entry = this.#entries.get(uid)
    if (entry === undefined || now - entry.readAt >= this.#maxAgeMs || now < entry.readAt) {
      if (entry === undefined && this.#entries.size >= MAX_USERS) this.#entries.clear()
      entry = { gids: this.#read(uid), readAt: now }
      this.#entries.set(uid, entry)
    }
    return [...entry.gids]
  }
}
