/**
 * A response of Server-Sent Events (`text/event-stream; charset=utf-8`), as Triton's generate
 * stream sends one: its status is its first event's (200, or an error's own when the first event
 * is an error), each event is `data: <JSON>\n\n`, and an error is `data: {"error": <message>}\n\n`
 * that ends it. A write resolves once the client took the event before it (or went away), so a
 * model that awaits each of its responses is held back by a slow client, not piled up in memory;
 * a client that takes nothing for the send timeout is dropped.
 */
import { once } from 'node:events'
import type { Socket } from 'node:net'
import { PassThrough } from 'node:stream'
import type { FastifyReply } from 'fastify'
import { watchOutput } from '../util/send-progress'
import { httpStatusOf } from './error-handler'

export const EVENT_STREAM_TYPE = 'text/event-stream; charset=utf-8'

const event = (json: string) => `data: ${json}\n\n`

export class EventStream {
  readonly #reply: FastifyReply
  readonly #sendTimeoutMs: number
  readonly #body = new PassThrough()
  readonly #closed: Promise<void>
  #started = false

  constructor (reply: FastifyReply, sendTimeoutMs: number) {
    this.#reply = reply
    this.#sendTimeoutMs = sendTimeoutMs
    // Awaited only while the reply is not destroyed: its close is still to come.
    this.#closed = new Promise((resolve) => reply.raw.once('close', resolve))
    // Written after the client went away: nothing to tell anyone.
    this.#body.on('error', () => {})
  }

  /** Whether the response has started (its status is sent, or on its way). */
  get started (): boolean {
    return this.#started
  }

  #start (status: number): void {
    this.#started = true
    this.#reply.code(status).type(EVENT_STREAM_TYPE).send(this.#body)
  }

  /** Sends one event (starting the response with 200); resolves once the client can take another. */
  async write (json: string): Promise<void> {
    if (!this.#started) this.#start(200)
    if (this.#reply.raw.destroyed || this.#body.write(event(json))) return
    // Not destroyed: still on its socket.
    const stop = watchOutput(this.#reply.raw.socket as Socket, this.#sendTimeoutMs, () => {
      this.#reply.log.warn({ sendTimeoutMs: this.#sendTimeoutMs }, 'the client read none of its event stream for the send timeout: connection dropped')
      this.#reply.raw.destroy()
    })
    try {
      await Promise.race([once(this.#body, 'drain'), this.#closed])
    } finally {
      stop()
    }
  }

  /** Ends the response (starting it with 200 if no event was sent). */
  end (): void {
    if (!this.#started) this.#start(200)
    this.#body.end()
  }

  /** Sends `error` as the last event (starting the response with its status if none was sent). An
   * error whose message must not be sent is logged and sent as a bare 500's. */
  fail (error: unknown): void {
    const status = httpStatusOf(error)
    if (status === undefined) this.#reply.log.error({ err: error }, 'request failed')
    if (!this.#started) this.#start(status ?? 500)
    this.#body.end(event(JSON.stringify({ error: status === undefined ? 'Internal Server Error' : (error as Error).message })))
  }
}
