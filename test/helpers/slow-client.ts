/**
 * Clients that stop reading: an infer request on a raw socket that pauses once its response starts,
 * so the server's writes back up (a client that never drains its socket).
 */
import { once } from 'node:events'
import { connect, type Socket } from 'node:net'
import type { FastifyInstance } from 'fastify'
import { setTimeout as sleep } from 'node:timers/promises'
import type { Test } from 'tap'
import { PATIENCE_MS } from './sync'

export interface StalledResponse {
  socket: Socket
  /** Bytes of the response read before the client stopped. */
  received: number
  /** The text of the first bytes read: the status line and headers. */
  head: string
  /** Settles when the connection has closed, at either end. */
  closed: Promise<unknown>
}

/** Sends `body` to `/v2/models/<model>/infer` and stops reading once the first bytes arrive. The
 * server closes the connection after the response, so a client that reads it all sees it end. */
export async function stalledInfer (t: Test, port: number, model: string, body: unknown): Promise<StalledResponse> {
  const payload = JSON.stringify(body)
  const socket = connect(port, '127.0.0.1')
  // Weakly: a test that makes many of these and ends them itself must not keep their buffers alive.
  const ended = new WeakRef(socket)
  t.teardown(() => ended.deref()?.destroy())
  const closed = once(socket, 'close')
  await once(socket, 'connect')
  socket.write(`POST /v2/models/${model}/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n` +
    `Connection: close\r\nContent-Length: ${Buffer.byteLength(payload)}\r\n\r\n${payload}`)
  const [first] = await once(socket, 'data') as [Buffer]
  socket.pause()
  return { socket, received: first.length, head: first.subarray(0, 4096).toString('latin1'), closed }
}

/** Reads what is left of a stalled response, until the connection ends: the bytes read. */
export async function drain (socket: Socket): Promise<number> {
  let received = 0
  socket.on('data', (chunk: Buffer) => { received += chunk.length })
  socket.resume()
  await once(socket, 'close')
  return received
}

/** The connections the app's server has open. */
async function connectionCount (app: FastifyInstance): Promise<number> {
  return await new Promise((resolve, reject) => app.server.getConnections((error, count) => error ? reject(error) : resolve(count)))
}

/** Resolves once the server has no connection open (it dropped its stalled clients). */
export async function untilNoConnections (app: FastifyInstance): Promise<void> {
  const deadline = Date.now() + PATIENCE_MS
  while (await connectionCount(app) > 0) {
    if (Date.now() > deadline) throw new Error(`the server still has connections open after ${PATIENCE_MS / 1000} s`)
    await sleep(20)
  }
}

/** Listens on 127.0.0.1 (closed on teardown): the port. */
export async function listenLocally (t: Test, app: FastifyInstance): Promise<number> {
  t.teardown(() => app.close())
  await app.listen({ host: '127.0.0.1', port: 0 })
  return (app.server.address() as { port: number }).port
}
