/**
 * The gRPC listener's Unix domain socket (the `grpc` option's `path`): a `net.Server` on the path,
 * its file given the mode and owner asked for once it is bound, and removed when it closes (Node
 * unlinks it). A file already at the path is refused, never removed: it may be another server's.
 *
 * The listener names a connection by its four ends, and a Unix socket has none (a client binds no
 * name), so every connection on the socket would look alike. Each accepted connection is named
 * here instead: the path as its remote address, a number of its own as its remote port. The
 * listener finds a call's socket by that name, and the peer rule asks the kernel who is at its
 * other end (SO_PEERCRED), as for an HTTP client on `app.listen({ path })`.
 */
import { once } from 'node:events'
import { chmodSync, chownSync } from 'node:fs'
import net from 'node:net'
import { grpcSocketPathTaken, grpcSocketPathTooLong } from '../errors'
import { fitsSocketAddress, MAX_SOCKET_PATH_BYTES } from '../util/socket-path'

export interface UnixSocketOptions {
  path: string
  /** The socket file's permission bits; default, as the umask leaves them. */
  mode?: number
  /** The socket file's owner and group; default, the server's user and group. */
  owner?: { uid?: number, gid?: number }
}

/** The remote address of the listener's connections on `path` (`unix:<path>`, as gRPC names a Unix socket). */
export const unixSocketAddress = (path: string): string => `unix:${path}`

/** Gives the socket the name the listener knows it by: read-only, on this socket alone (a
 * Unix socket's own ends are undefined, which is how the peer rule knows to use SO_PEERCRED). */
function nameConnection (socket: net.Socket, path: string, number: number): void {
  Object.defineProperties(socket, { remoteAddress: { value: unixSocketAddress(path) }, remotePort: { value: number } })
}

/** Listens on `path`, handing each named connection to `accept`; rejects with the bind's error (a
 * path taken: `ERR_SHM_GRPC_SOCKET_PATH_TAKEN`). */
export async function listenOnSocket (path: string, accept: (socket: net.Socket) => void): Promise<net.Server> {
  if (!fitsSocketAddress(path)) throw grpcSocketPathTooLong(path, MAX_SOCKET_PATH_BYTES)
  let connections = 0
  const server = net.createServer((socket) => {
    connections += 1
    nameConnection(socket, path, connections)
    accept(socket)
  })
  server.listen(path)
  try {
    await once(server, 'listening')
  } catch (error) {
    throw (error as NodeJS.ErrnoException).code === 'EADDRINUSE' ? grpcSocketPathTaken(error, path) : error
  }
  return server
}

/** Gives the socket file of a listener just bound the mode and owner asked for. Called before any
 * connection is accepted ('listening', and what awaits it, run before the event loop next polls
 * the socket); one made before, while the file had the umask's mode, is judged as any by the peer
 * rule. */
export function setSocketFile ({ path, mode, owner }: UnixSocketOptions): void {
  if (mode !== undefined) chmodSync(path, mode)
  if (owner !== undefined) chownSync(path, owner.uid ?? -1, owner.gid ?? -1)
}
