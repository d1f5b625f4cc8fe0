/**
 * What waits for an HTTP reply to close (sent, or its client gone): a request's reservation, its
 * leases, its send watch, its trace. One `close` listener per reply runs them all, in the order
 * they were added: `once` makes a wrapper and a bound function for each listener, and an array
 * once there are two, on every infer request.
 */
import type { ServerResponse } from 'node:http'
import type { FastifyReply } from 'fastify'

const ON_CLOSE = Symbol('fastify-triton-shm: run when this reply closes')

type Closing = ServerResponse & { [ON_CLOSE]?: Array<() => void> }

/** Calls `listener` once `reply` closes; at once if it is destroyed already. */
export function onReplyClose (reply: FastifyReply, listener: () => void): void {
  const raw = reply.raw as Closing
  if (raw.destroyed) return listener()
  const listeners = raw[ON_CLOSE]
  if (listeners !== undefined) {
    listeners.push(listener)
    return
  }
  const waiting = raw[ON_CLOSE] = [listener]
  raw.once('close', () => { for (const each of waiting.splice(0)) each() })
}
