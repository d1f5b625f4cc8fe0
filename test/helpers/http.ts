/** Requests to the plugin's routes and checks of their answers, shared by the HTTP tests. */
import http from 'node:http'
import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import type { Test } from 'tap'
import { registerBody, SYSTEM } from './app'

/** POSTs a register request as Triton's clients do: a JSON body with no Content-Type. */
export function register (app: FastifyInstance, name: string, key: string, byteSize: number, offset = 0,
  base = SYSTEM): Promise<LightMyRequestResponse> {
  return app.inject({
    method: 'POST',
    url: `${base}/region/${encodeURIComponent(name)}/register`,
    payload: registerBody(key, byteSize, offset)
  })
}

/** POSTs any body (already serialized) to `<base>/region/<name>/register`, with no Content-Type. */
export function registerRaw (app: FastifyInstance, name: string, payload: string | undefined,
  base = SYSTEM): Promise<LightMyRequestResponse> {
  return app.inject({ method: 'POST', url: `${base}/region/${encodeURIComponent(name)}/register`, payload })
}

/**
 * Asserts an error answer: the status, `Content-Type: application/json`, and a body that is exactly
 * `{"error": "<message>"}` (never Fastify's `{statusCode, code, error, message}`). Returns the message.
 */
export function assertError (t: Test, response: LightMyRequestResponse, statusCode: number,
  message?: string | RegExp): string {
  t.equal(response.statusCode, statusCode, `status ${statusCode}`)
  t.match(response.headers['content-type'], /^application\/json/, 'JSON content type')
  const body = JSON.parse(response.body) as Record<string, unknown>
  t.same(Object.keys(body), ['error'], 'the body holds "error" and nothing else')
  t.type(body.error, 'string', 'the error is a string')
  if (typeof message === 'string') t.equal(body.error, message, 'error message')
  else if (message !== undefined) t.match(body.error, message, 'error message')
  return body.error as string
}

/** Asserts a register/unregister success: 200, `Content-Type: application/json`, empty body. */
export function assertEmptySuccess (t: Test, response: LightMyRequestResponse): void {
  t.equal(response.statusCode, 200, `200 (body: ${response.body})`)
  t.equal(response.headers['content-type'], 'application/json', 'JSON content type')
  t.equal(response.body, '', 'empty body')
}

export interface RawResponse { statusCode: number, headers: http.IncomingHttpHeaders, body: string }

/** One request over the socket to 127.0.0.1, with exactly these headers (fetch would add a
 * Content-Type) and this path, sent as it is (no URL parser normalizes it). */
export function rawRequest (port: number, method: string, path: string, headers: Record<string, string> = {},
  body = ''): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const request = http.request({ host: '127.0.0.1', port, method, path, headers }, (response) => {
      let text = ''
      response.setEncoding('utf8')
      response.on('data', (chunk: string) => { text += chunk })
      response.on('end', () => resolve({ statusCode: response.statusCode ?? 0, headers: response.headers, body: text }))
    })
    request.on('error', reject)
    request.end(body)
  })
}

/** An answer read whole, as `app.inject` gives one: what `assertError` and `parseInferResponse` read. */
export type SocketResponse = LightMyRequestResponse

/**
 * POSTs `body` over a socket to 127.0.0.1 with exactly these headers: one buffer with its
 * Content-Length, or several sent as they are, chunked (no Content-Length).
 */
export function postBytes (port: number, path: string, headers: Record<string, string>, body: Buffer | Buffer[]): Promise<SocketResponse> {
  return new Promise((resolve, reject) => {
    const pieces = Buffer.isBuffer(body) ? [body] : body
    const sent = Buffer.isBuffer(body) ? { ...headers, 'content-length': String(body.length) } : headers
    const request = http.request({ host: '127.0.0.1', port, method: 'POST', path, headers: sent }, (response) => {
      const chunks: Buffer[] = []
      response.on('data', (chunk: Buffer) => chunks.push(chunk))
      response.on('end', () => {
        const rawPayload = Buffer.concat(chunks)
        resolve({ statusCode: response.statusCode, headers: response.headers, rawPayload, body: rawPayload.toString() } as unknown as SocketResponse)
      })
    })
    request.on('error', reject)
    for (const piece of pieces) request.write(piece)
    request.end()
  })
}
