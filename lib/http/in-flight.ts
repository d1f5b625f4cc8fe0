/**
 * An HTTP request's share of what all requests in flight hold (`registry.inFlight`): its
 * reservation is opened when its body starts to arrive, charged for the body before it is read,
 * for its parsed JSON before it is parsed, and by the request for its outputs and answer; it is
 * released when the reply closes (finished, or its connection gone: at the latest the send
 * timeout after a client stopped reading).
 */
import type { IncomingMessage } from 'node:http'
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { InFlightBudget, InFlightReservation } from '../../types/kserve'
import { onReplyClose } from './reply-close'

const RESERVATION = Symbol('fastify-triton-shm: what this request holds in flight')

type Reserving = IncomingMessage & { [RESERVATION]?: InFlightReservation }

/** Parsed JSON takes up to this many times its text: V8 arrays of numbers (nested arrays of one
 * element take 8 times their text), then the typed arrays the tensors are read into. */
export const PARSED_JSON_MULTIPLE = 12

/** The reservation of `request`, opened now if it has none, and released when its reply closes. */
export function reservationOf (request: FastifyRequest, reply: FastifyReply, budget: InFlightBudget): InFlightReservation {
  const raw = request.raw as Reserving
  const opened = raw[RESERVATION]
  if (opened !== undefined) return opened
  const reservation = budget.open()
  raw[RESERVATION] = reservation
  onReplyClose(reply, () => reservation.release())
  return reservation
}

/** The reservation `request` has, if its body was charged (see `inferPayload`). */
export const reservationIn = (request: FastifyRequest): InFlightReservation | undefined => (request.raw as Reserving)[RESERVATION]
