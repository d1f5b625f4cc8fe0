/**
 * How `KServeClient` sends a request and reads its answer: Node's `fetch` over TCP, or, when the
 * server listens on a Unix domain socket (`app.listen({ path })`), `node:http` with its
 * `socketPath` (Node's `fetch` has no such option without a dispatcher of the `undici` package).
 */
import http from 'node:http'

export interface HttpRequest {
  method: 'GET' | 'POST'
  headers: Record<string, string>
  body?: string
}

export interface HttpAnswer {
  status: number
  statusText: string
  text: string
}

/** Sends `request` to `url`; resolves with the whole answer. */
export type HttpExchange = (url: string, request: HttpRequest) => Promise<HttpAnswer>

/** Over TCP (or TLS, for an `https:` URL), with Node's `fetch`. */
export const fetchExchange: HttpExchange = async (url, request) => {
  const response = await fetch(url, request)
  return { status: response.status, statusText: response.statusText, text: await response.text() }
}

/** Over the Unix domain socket at `socketPath`: `url` gives the path and the Host header. */
export const socketExchange = (socketPath: string): HttpExchange => (url, { method, headers, body }) =>
  new Promise((resolve, reject) => {
    const request = http.request(url, { socketPath, method, headers }, (response) => {
      const chunks: Buffer[] = []
      response.on('data', (chunk: Buffer) => chunks.push(chunk))
      response.on('error', reject)
      response.on('end', () => resolve({
        status: response.statusCode as number,
        statusText: response.statusMessage as string,
        text: Buffer.concat(chunks).toString()
      }))
    })
    request.on('error', reject)
    request.end(body)
  })
