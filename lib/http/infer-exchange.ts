/**
 * An infer request over HTTP: read from a Fastify request (JSON, or the binary tensor data
 * extension), its leases tied to the reply's life, and answered as an HTTP body. The request
 * itself (`InferRequest`) knows no transport.
 */
import type { Socket } from 'node:net'
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { InferRequestWire } from '../../types/kserve'
import { InferRequest, type ReadInferRequestOptions } from '../kserve/infer-request'
import { checkInferRequest } from '../kserve/infer-wire'
import { HEADER_LENGTH_HEADER, InferBody } from './infer-body'

function bodyOf (request: FastifyRequest): { header: InferRequestWire, binary: Buffer } {
  if (request.body instanceof InferBody) return request.body
  return { header: request.body as InferRequestWire, binary: Buffer.alloc(0) }
}

/**
 * Reads the infer request of `request` for `options.model`. Every lease it takes is released when
 * the reply is finished or the connection closes (also while the reply waits behind pipelined
 * ones), so a handler cannot forget one.
 */
export function readInferRequest (request: FastifyRequest, reply: FastifyReply, options: ReadInferRequestOptions): InferRequest {
  const { header, binary } = bodyOf(request)
  const infer = new InferRequest(checkInferRequest(header), binary, options)
  // A pipelined request's response waits behind the ones sent before it, and Node never closes a
  // waiting response when its connection goes: the socket's close ends the request too.
  const socket = request.raw.socket
  let forgetSocket = () => {}
  const close = () => {
    reply.raw.off('close', close)
    forgetSocket()
    if (!reply.raw.writableFinished) infer.abandon()
    infer.release()
  }
  reply.raw.once('close', close)
  if (reply.raw.destroyed || socket.destroyed) close()
  else forgetSocket = onSocketClose(socket, close)
  return infer
}

/**
 * The HTTP response body of `infer`, for the outputs it asked for; sets the reply's headers. The
 * body holds no byte of shared memory, so the request's leases end here: a client slow to read its
 * response holds no region. One that reads nothing for `limits.sendTimeoutMs` is dropped.
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

/** Drops the connection once no byte of the response has moved for `ms` (Node restarts a socket's
 * timeout at every write the client's reading lets through, and sets its keep-alive timeout after). */
function dropWhenStalled (reply: FastifyReply, ms: number): void {
  reply.raw.setTimeout(ms, () => {
    reply.log.warn({ sendTimeoutMs: ms }, 'the client read none of its response for the send timeout: connection dropped')
    reply.raw.destroy()
  })
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
