/**
 * Whose memory a client may register: the rule that keeps the server from being a confused deputy.
 * Registering a key makes the server map that object read-write with its own rights; by default a
 * client may name only an object it could open read-write itself. Who the client is, is asked of
 * the kernel (lib/addon/peer-identity.ts), never of anything the client sends.
 */
import net from 'node:net'
import type { PeerIdentity } from '../../types'
import { type ConnectionAddresses, peerOfAddresses, peerOfSocket, UserGroupCache } from '../addon/peer-identity'

/**
 * - `peer` (the default): a client may register only an object its own user could open
 *   read-write (as access(2) decides: root may open any); a client the kernel cannot name (on
 *   another host, in another network namespace, behind a proxy) is refused.
 * - `local`: any client on this host (the kernel names it) may register any object the server's
 *   user can open; others are refused.
 * - `any`: any client at all may register any object the server's user can open (Triton's
 *   behaviour with `--allow-client-shm=true`): whoever reaches the port can read and write the
 *   shared memory of every program of that user.
 */
export type ClientShmAccess = 'peer' | 'local' | 'any'

export const CLIENT_SHM_ACCESS: readonly ClientShmAccess[] = ['peer', 'local', 'any']

/** Where a call came from, as its face knows it: the accepted socket (HTTP: TCP, or a Unix
 * domain socket; anything else, such as `app.inject()`'s, is this process itself), or the four
 * ends of its connection (gRPC), none when the face cannot tell. */
export type CallerConnection = { socket: net.Socket } | { addresses: Partial<ConnectionAddresses> } | undefined

const isComplete = (addresses: Partial<ConnectionAddresses>): addresses is ConnectionAddresses =>
  typeof addresses.localAddress === 'string' && typeof addresses.localPort === 'number' &&
  typeof addresses.remoteAddress === 'string' && typeof addresses.remotePort === 'number'

export class PeerPolicy {
  readonly access: ClientShmAccess
  /** Each registry reads a user's groups at most once a second (see UserGroupCache). */
  readonly #groups = new UserGroupCache()

  constructor (access: ClientShmAccess = 'peer') {
    this.access = access
  }

  /**
   * The user a registration from `connection` is mapped for: their identity (`peer`: the object
   * must be open to them), `null` when the rule needs a client the kernel cannot name (the
   * registry refuses it), or undefined when any object the server can open will do.
   */
  peerFor (connection: CallerConnection): PeerIdentity | null | undefined {
    if (this.access === 'any') return undefined
    const identity = this.#identify(connection)
    if (identity === undefined) return null
    return this.access === 'peer' ? identity : undefined
  }

  #identify (connection: CallerConnection): PeerIdentity | undefined {
    if (connection === undefined) return undefined
    if ('addresses' in connection) {
      return isComplete(connection.addresses) ? peerOfAddresses(connection.addresses, this.#groups.groupsOf) : undefined
    }
    // No connection at all: a request this process made of itself (app.inject()).
    if (!(connection.socket instanceof net.Socket)) return thisProcess()
    return peerOfSocket(connection.socket, this.#groups.groupsOf)
  }
}

/** This process's user and groups (the package runs on Linux only, where both exist). */
function thisProcess (): PeerIdentity {
  const uid = (process.getuid as () => number)()
  return { uid, gids: [...new Set((process.getgroups as () => number[])())].sort((a, b) => a - b) }
}
