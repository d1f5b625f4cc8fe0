/**
 * The HTTP face's part of a traced request's trace (Triton's HTTP server's instants): received
 * when Fastify took the request in, read when its handler runs, sent once its reply is (or the
 * client went away).
 */
import type { FastifyReply } from 'fastify'
import { FaceTrace } from '../models/face-trace'
import { onReplyClose } from './reply-close'

/** The face's part of the trace of the request `reply` answers, from its handler. */
export function httpTrace (reply: FastifyReply): FaceTrace {
  // Fastify times each request from its arrival.
  return new FaceTrace('http', performance.now() - reply.elapsedTime)
}

/** The reply starts: `responded` if it is a response (not an error); the trace ends once it is sent. */
export function traceReply (trace: FaceTrace, responded: boolean, reply: FastifyReply): void {
  if (!trace.traced) return
  trace.sending(responded)
  // A response closes once it is sent, or its client went away.
  onReplyClose(reply, () => trace.sent())
}
