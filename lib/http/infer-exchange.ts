/**
 * An infer request over HTTP: read from a Fastify request (JSON, or the binary tensor data
 * extension), its leases tied to the reply's life, and answered as an HTTP body. The request
 * itself (`InferRequest`) knows no transport.
 */
import type { Socket } from 'node:net'
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { InferRequestWire, InFlightReservation, ModelSignature } from '../../types/kserve'
import { InferRequest, type ReadInferRequestOptions } from '../kserve/infer-request'
import { checkInferRequest } from '../kserve/infer-wire'
import { rawInferRequest } from '../kserve/raw-request'
import { watchOutput } from '../util/send-progress'
import { InferBody } from './infer-body'
import { HEADER_LENGTH_HEADER } from './infer-headers'
import { reservationIn, reservationOf } from './in-flight'
import { onReplyClose } from './reply-close'

/** The body's JSON and binary section; no body at all is Triton's raw request of no bytes. */
function bodyOf ({ body }: FastifyRequest): { header: InferRequestWire | undefined, binary: Buffer } {
  if (body instanceof InferBody) return body
  return { header: body as InferRequestWire | undefined, binary: Buffer.alloc(0) }
}

/** The request `request` carries for `model`: its JSON, or the request a raw body stands for (a
 * BYTES input's copy charged first). */
function wireOf (request: FastifyRequest, model: ModelSignature, reservation: InFlightReservation): { wire: InferRequestWire, bytes: Buffer } {
  const { header, binary } = bodyOf(request)
  if (header !== undefined) return { wire: checkInferRequest(header, 'json'), bytes: binary }
  const { request: wire, bytes } = rawInferRequest(model, binary, (byteSize) => reservation.charge(byteSize))
  return { wire, bytes }
}

/**
 * Reads the infer request of `request` for `options.model`. Every lease it takes is released when
 * the reply is finished or the connection closes (also while the reply waits behind pipelined
 * ones), so a handler cannot forget one. What it holds is charged to the registry's `inFlight`
 * (its body first, if `useInferBodyParser` was not told to charge it as it arrived) and given
 * back when the reply closes.
 */
export function readInferRequest (request: FastifyRequest, reply: FastifyReply, options: ReadInferRequestOptions): InferRequest {
  const reservation = reservationFor(request, reply, options)
  const { wire, bytes } = wireOf(request, options.model, reservation)
  // The body copies each output's bytes once.
  return tiedToReply(request, reply, new InferRequest(wire, bytes, { outputCopies: 1, ...options, reservation }))
}

/** The reservation a request's reading charges: the one given, or the body's (charged now if no
 * hook charged it as it arrived). */
export const reservationFor = (request: FastifyRequest, reply: FastifyReply, options: ReadInferRequestOptions): InFlightReservation =>
  options.reservation ?? reservationIn(request) ?? bodyCharged(request, reply, options)

/** `infer`, abandoned if the reply closes before it is finished, and released when it closes. */
export function tiedToReply (request: FastifyRequest, reply: FastifyReply, infer: InferRequest): InferRequest {
  // A pipelined request's response waits behind the ones sent before it, and Node never closes a
  // waiting response when its connection goes: the socket's close ends the request too.
  const socket = request.raw.socket
  let forgetSocket: (() => void) | undefined
  let closed = false
  const close = () => {
    if (closed) return
    closed = true
    forgetSocket?.()
    if (!reply.raw.writableFinished) infer.abandon()
    infer.release()
  }
  onReplyClose(reply, close)
  if (socket.destroyed) close()
  else if (!closed) forgetSocket = onSocketClose(socket, close)
  return infer
}

/** A reservation for a request whose body no hook charged: the body is counted now, read already. */
function bodyCharged (request: FastifyRequest, reply: FastifyReply, { registry }: ReadInferRequestOptions) {
  const reservation = reservationOf(request, reply, registry.inFlight)
  reservation.charge(Number(request.headers['content-length'] ?? 0))
  return reservation
}

/**
 * The HTTP response body of `infer`, for the outputs it asked for; sets the reply's headers. The
 * body holds no byte of shared memory, so the request's leases end here: a client slow to read its
 * response holds no region. One that reads nothing for `limits.sendTimeoutMs` is dropped. The
 * body's copy of the outputs was charged with their storage.
 */
export function inferResponse (infer: InferRequest, reply: FastifyReply): string | Buffer {
  try {
    const { header, binary } = infer.encode()
    dropWhenStalled(reply, infer.limits.sendTimeoutMs)
    if (binary.length === 0) {
      reply.type('application/json')
      return header
    }
    const headerBytes = Buffer.from(header)
    reply.type('application/octet-stream').header(HEADER_LENGTH_HEADER, headerBytes.length)
    return Buffer.concat([headerBytes, ...binary])
  } finally {
    infer.release()
  }
}

/** Drops the connection once no byte of the response has moved for `ms`. */
export function dropWhenStalled (reply: FastifyReply, ms: number): void {
  const socket = reply.raw.socket
  if (socket === null) return
  const stop = watchOutput(socket, ms, () => {
    reply.log.warn({ sendTimeoutMs: ms }, 'the client read none of its response for the send timeout: connection dropped')
    reply.raw.destroy()
  })
  onReplyClose(reply, stop)
}

const SOCKET_CLOSES = Symbol('fastify-triton-shm: infer requests ended by this socket\'s close')

type ClosingSocket = Socket & { [SOCKET_CLOSES]?: Set<() => void> }

/** Calls `close` when `socket` closes, through one listener per socket however many requests are
 * pipelined on it (a listener each would pile up past Node's warning limit). Returns the undo. */
function onSocketClose (socket: ClosingSocket, close: () => void): () => void {
  const closes = socket[SOCKET_CLOSES] ?? watchClose(socket)
  closes.add(close)
  return () => { closes.delete(close) }
}

function watchClose (socket: ClosingSocket): Set<() => void> {
  const closes = new Set<() => void>()
  socket[SOCKET_CLOSES] = closes
  socket.once('close', () => { for (const close of closes) close() })
  return closes
}
