/**
 * Two duplex streams joined to each other in memory: what one end writes, the other reads, and
 * ending or destroying one ends or destroys the other. A connection between two parts of one
 * process that speak over a stream (an HTTP/2 client and server) without a socket.
 */
import { Duplex } from 'node:stream'

export function duplexPair (): [Duplex, Duplex] {
  const ends: Duplex[] = []
  const end = (other: number) => new Duplex({
    read () {},
    write (chunk: Buffer, _encoding, callback) {
      ends[other].push(chunk)
      callback()
    },
    final (callback) {
      ends[other].push(null)
      callback()
    },
    destroy (error, callback) {
      ends[other].destroy()
      callback(error)
    }
  })
  ends.push(end(1), end(0))
  return [ends[0], ends[1]]
}
