/**
 * Triton's generate extension over a real socket: POSTs to `.../generate` and `.../generate_stream`,
 * and a strict parser of the Server-Sent Events a stream answers (every event one `data: <JSON>`
 * line and a blank line, as Triton sends them), whole or event by event.
 */
import { once } from 'node:events'
import http from 'node:http'
import type { Test } from 'tap'

/** The JSON of each event of `text`; throws on anything that is not `data: <JSON>\n\n`, event after event. */
export function sseEvents (text: string): unknown[] {
  if (text === '') return []
  if (!text.endsWith('\n\n')) throw new Error(`the stream does not end with a blank line: ${JSON.stringify(text.slice(-40))}`)
  return text.slice(0, -2).split('\n\n').map((block) => {
    if (!block.startsWith('data: ') || block.includes('\n')) throw new Error(`not one data line: ${JSON.stringify(block.slice(0, 80))}`)
    return JSON.parse(block.slice('data: '.length))
  })
}

export interface GenerateResponse {
  statusCode: number
  headers: http.IncomingHttpHeaders
  body: string
}

const bodyText = (body: string | object) => typeof body === 'string' ? body : JSON.stringify(body)

/** POSTs `body` (an object is sent as JSON, a string as it is) to `path`, and reads the whole answer. */
export async function postGenerate (port: number, path: string, body: string | object, headers: Record<string, string> = {}): Promise<GenerateResponse> {
  const request = http.request({ host: '127.0.0.1', port, method: 'POST', path, headers })
  request.end(bodyText(body))
  const [response] = await once(request, 'response') as [http.IncomingMessage]
  let text = ''
  response.setEncoding('utf8')
  for await (const chunk of response) text += chunk as string
  return { statusCode: response.statusCode as number, headers: response.headers, body: text }
}

/** A generate stream read event by event, as it arrives; its request is destroyed when the test ends. */
export class EventReader {
  readonly response: Promise<http.IncomingMessage>
  readonly request: http.ClientRequest
  #text = ''
  readonly #events: unknown[] = []
  #waiting: (() => void) | undefined
  #ended = false

  constructor (t: Test, port: number, path: string, body: string | object) {
    this.request = http.request({ host: '127.0.0.1', port, method: 'POST', path })
    this.request.on('error', () => {})
    t.teardown(() => { this.request.destroy() })
    this.request.end(bodyText(body))
    this.response = once(this.request, 'response').then(([response]: http.IncomingMessage[]) => {
      response.setEncoding('utf8')
      response.on('data', (chunk: string) => this.#take(chunk))
      response.on('end', () => {
        this.#ended = true
        this.#wake()
      })
      response.on('error', () => {})
      return response
    })
    // A test that destroys the request reads no response.
    this.response.catch(() => {})
  }

  #wake (): void {
    const waiting = this.#waiting
    this.#waiting = undefined
    waiting?.()
  }

  #take (chunk: string): void {
    this.#text += chunk
    const end = this.#text.lastIndexOf('\n\n')
    if (end === -1) return
    this.#events.push(...sseEvents(this.#text.slice(0, end + 2)))
    this.#text = this.#text.slice(end + 2)
    this.#wake()
  }

  /** The next event; undefined once the stream ended without one. */
  async next (): Promise<unknown> {
    await this.response
    while (this.#events.length === 0 && !this.#ended) await new Promise<void>((resolve) => { this.#waiting = resolve })
    if (this.#events.length === 0 && this.#text !== '') throw new Error(`the stream ended inside an event: ${JSON.stringify(this.#text)}`)
    return this.#events.shift()
  }
}
