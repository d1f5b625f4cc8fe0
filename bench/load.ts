/**
 * HTTP load with autocannon, from the runner's process (the server is a child process). Every
 * response's latency is recorded, so percentiles are exact and can be split by request kind.
 */
import autocannon from 'autocannon'

// autocannon appends every response body to a string (a UTF-8 decode of each chunk, kept until
// the response ends), for its `expectBody`/`onResponse` features. Over megabytes of binary
// tensor data that makes the load generator, not the server, the bottleneck. No bench here uses
// response bodies through autocannon (results are checked separately), so the queue keeps none.
const Queue = require('autocannon/lib/pipelinedRequestsQueue') as { prototype: { addBody (data: Buffer): void } }
Queue.prototype.addBody = function addNoBody () {}

export interface LoadRequest {
  method: 'GET' | 'POST'
  path: string
  headers?: Record<string, string>
  body?: Buffer | string
  /** Rewrites the request before each send (unique names...); `context` is per connection. */
  setupRequest?: (request: autocannon.Request, context: Record<string, unknown>) => autocannon.Request
  /** A label for the latencies of this request (defaults to its path). */
  kind?: string
}

export interface LoadOptions {
  url: string
  requests: LoadRequest[]
  connections: number
  /** Seconds to run for; or `amount` requests. */
  durationSeconds?: number
  amount?: number
  /** Seconds before a request counts as timed out. */
  timeoutSeconds?: number
  /** Requests in flight per connection (HTTP/1.1 pipelining); 1 by default. */
  pipelining?: number
}

export interface LoadResult {
  /** Completed 2xx responses. */
  completed: number
  /** Wall-clock seconds from the start of the load to its last response. */
  seconds: number
  requestsPerSecond: number
  /** Milliseconds, per request kind. */
  latencies: Map<string, number[]>
  /** Response bytes received, headers included. */
  bytesReceived: number
}

export async function runLoad (options: LoadOptions): Promise<LoadResult> {
  const latencies = new Map<string, number[]>()
  let lastKind = ''
  const requests = options.requests.map((request): autocannon.Request => {
    const kind = request.kind ?? request.path
    latencies.set(kind, latencies.get(kind) ?? [])
    const defined: autocannon.Request = {
      method: request.method,
      path: request.path,
      // Called for each response just before autocannon emits 'response' for it.
      onResponse: () => { lastKind = kind }
    }
    // autocannon merges these over its defaults: an explicit undefined would erase a default.
    if (request.headers !== undefined) defined.headers = request.headers
    if (request.body !== undefined) defined.body = request.body
    if (request.setupRequest !== undefined) defined.setupRequest = request.setupRequest as autocannon.Request['setupRequest']
    return defined
  })
  let completed = 0
  let failed = 0
  let bytesReceived = 0
  let firstError: unknown
  // autocannon notices the end of an `amount` run on its next 1-second tick: time runs from the
  // start to the last response, not to its 'done'.
  const started = process.hrtime.bigint()
  let lastResponse = started
  let finish: (error: unknown, result: autocannon.Result) => void = () => {}
  const finished = new Promise<autocannon.Result>((resolve, reject) => {
    finish = (error, result) => error ? reject(error) : resolve(result)
  })
  const instance = autocannon({
    url: options.url,
    connections: options.connections,
    ...(options.amount === undefined ? { duration: options.durationSeconds ?? 10 } : { amount: options.amount }),
    timeout: options.timeoutSeconds ?? 30,
    pipelining: options.pipelining ?? 1,
    requests
  }, (error, result) => finish(error, result))
  instance.on('response', (_client, statusCode, resBytes, responseTime) => {
    lastResponse = process.hrtime.bigint()
    bytesReceived += resBytes
    if (statusCode >= 200 && statusCode < 300) {
      completed++
      latencies.get(lastKind)?.push(responseTime)
    } else {
      failed++
    }
  })
  instance.on('reqError', (error) => { firstError ??= error })
  const result = await finished
  const seconds = Number(lastResponse - started) / 1e9
  if (failed > 0 || result.errors > 0 || result.timeouts > 0) {
    throw new Error(`load on ${options.requests.map((request) => request.path).join(', ')}: ` +
      `${failed} non-2xx, ${result.errors} errors, ${result.timeouts} timeouts` +
      (firstError === undefined ? '' : ` (${String(firstError)})`))
  }
  return { completed, seconds, requestsPerSecond: completed / seconds, latencies, bytesReceived }
}
