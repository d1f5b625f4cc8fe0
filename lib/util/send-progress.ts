/**
 * Whether a peer is taking what is written to it: a connection whose output has not moved for a
 * while belongs to a client that stopped reading, and holds its answer's memory for nothing.
 * Progress is read from the socket, over HTTP/1.1 and under HTTP/2 alike: the bytes handed to it
 * and the bytes libuv still queues for the kernel. Node's own socket timeout is not used: it is
 * suppressed whenever the queue moved since it was armed, so a write that moved once before the
 * client stalled puts the drop a whole timeout later.
 */
import type { Socket } from 'node:net'
import { performance } from 'node:perf_hooks'
import { checkEvery, checkPeriodFor } from './periodic-checks'

type Queueing = Socket & { _handle?: { writeQueueSize?: number } | null }

/** A number that changes whenever the socket's output moves (NaN for a socket without one). */
const outputState = (socket: Queueing): number => socket.bytesWritten - (socket._handle?.writeQueueSize ?? 0)

/**
 * Calls `stalled` once the output of `socket` has not moved for `ms` while it had something to
 * send (`waiting`, by default always), checked every tenth of it (at most every second): so
 * within [ms, ms + 1 s] of the last byte the peer took. Returns the way to stop watching.
 */
export function watchOutput (socket: Socket, ms: number, stalled: () => void, waiting: () => boolean = always): () => void {
  let seen = outputState(socket)
  let movedAt = performance.now()
  const stop = checkEvery(checkPeriodFor(ms), () => {
    const state = outputState(socket)
    if (state !== seen || !waiting()) {
      seen = state
      movedAt = performance.now()
    } else if (performance.now() - movedAt >= ms) {
      stop()
      stalled()
    }
  })
  return stop
}

const always = () => true
