/**
 * A lean HTTP/1.1 load generator, for a bench where the generator shares the cores with the server
 * and its own cost bounds what is measured (bench/workers.ts): keep-alive `node:net` connections,
 * each writing one request encoded once, pipelined up to `pipelining` in flight, and counting whole
 * responses by their status line and their length (`content-length`, or chunked) alone. Nothing is
 * recorded per response (no latencies, no body); any status but 200, a malformed response, a
 * connection closed or failing, or none answering within the timeout fails the load.
 */
import net from 'node:net'
import type { LoadRequest } from './load'

export interface PipelinedLoadOptions {
  url: string
  request: Pick<LoadRequest, 'method' | 'path' | 'headers' | 'body'>
  connections: number
  /** Requests in flight per connection; 1 by default. */
  pipelining?: number
  /** Seconds to send for (the responses in flight then still count); or `amount` requests. */
  durationSeconds?: number
  amount?: number
  /** Seconds without a response, while some are in flight, before the load fails. */
  timeoutSeconds?: number
}

export interface PipelinedLoadResult {
  /** Complete 200 responses. */
  completed: number
  /** Wall-clock seconds from the first request to the last response. */
  seconds: number
  requestsPerSecond: number
  /** CPU time (user and system) of this process over the load: the generator's cost. */
  cpuMicros: number
  cpuMicrosPerRequest: number
}

/** The request's bytes, as written for every send: the connection kept alive by HTTP/1.1's default. */
export function encodeRequest (request: PipelinedLoadOptions['request'], host: string): Buffer {
  const body = request.body === undefined ? Buffer.alloc(0) : Buffer.from(request.body)
  const headers = Object.entries(request.headers ?? {})
    .filter(([name]) => !['host', 'content-length', 'connection', 'transfer-encoding'].includes(name.toLowerCase()))
    .map(([name, value]) => `${name}: ${value}\r\n`).join('')
  const length = request.method === 'GET' && body.length === 0 ? '' : `content-length: ${body.length}\r\n`
  return Buffer.concat([Buffer.from(`${request.method} ${request.path} HTTP/1.1\r\nhost: ${host}\r\n${headers}${length}\r\n`, 'latin1'), body])
}

const HEAD_END = Buffer.from('\r\n\r\n')
const LINE_END = Buffer.from('\r\n')
const STATUS_200 = Buffer.from('HTTP/1.1 200 ')
const CONTENT_LENGTH = Buffer.from('\r\ncontent-length:')
const CHUNKED = /\r\ntransfer-encoding:[ \t]*chunked[ \t]*\r\n/i
const ANY_CONTENT_LENGTH = /\r\ncontent-length:[ \t]*(\d+)[ \t]*\r\n/i
const CHUNK_SIZE = /^([0-9a-f]+)[ \t]*(;.*)?$/i
/** A head, or a chunk's size line, longer than this is refused rather than buffered. */
const MAX_LINE_BYTES = 16 * 1024
const DIGIT_0 = 0x30
const READ_BUFFER_BYTES = 64 * 1024

/** Where a connection's reading is: in a head, a body, or a chunked body's parts. */
const State = { Head: 0, Body: 1, ChunkSize: 2, ChunkData: 3, ChunkEnd: 4, Trailer: 5 } as const

/**
 * Finds the responses in one connection's bytes as they arrive: `feed` returns how many completed
 * in them, and throws on a response that is not a well-formed 200. The usual response costs two
 * native searches (its head's end, its content-length) and a few byte reads.
 */
export class ResponseCounter {
  #state: number = State.Head
  /** Bytes of a body or chunk still to skip. */
  #remaining = 0
  /** The start of a head or line that the last chunk cut. */
  #rest: Buffer | undefined

  /** Reads `chunk` up to `length` (its whole length by default), which it may reuse afterwards. */
  feed (chunk: Buffer, length = chunk.length): number {
    let data = chunk
    let size = length
    if (this.#rest !== undefined) {
      data = Buffer.concat([this.#rest, chunk.subarray(0, length)])
      size = data.length
      this.#rest = undefined
    }
    let at = 0
    let completed = 0
    while (at < size) {
      if (this.#state === State.Body || this.#state === State.ChunkData) {
        const skipped = Math.min(this.#remaining, size - at)
        at += skipped
        this.#remaining -= skipped
        if (this.#remaining > 0) break
        if (this.#state === State.Body) {
          completed++
          this.#state = State.Head
        } else {
          this.#state = State.ChunkEnd
        }
        continue
      }
      const needle = this.#state === State.Head ? HEAD_END : LINE_END
      const end = data.indexOf(needle, at)
      // Past `size`, a reused buffer holds an earlier read's bytes.
      if (end < 0 || end + needle.length > size) {
        this.#keep(data.subarray(at, size))
        break
      }
      if (this.#state === State.Head) {
        completed += this.#head(data, at, end)
        at = end + HEAD_END.length
      } else {
        completed += this.#line(data.toString('latin1', at, end))
        at = end + LINE_END.length
      }
    }
    return completed
  }

  /** Reads a head from `start` to `end`; returns 1 when it is a whole response (no body). */
  #head (data: Buffer, start: number, end: number): number {
    if (end - start < STATUS_200.length || data.compare(STATUS_200, 0, STATUS_200.length, start, start + STATUS_200.length) !== 0) {
      throw new Error(`a response that is not a 200: ${JSON.stringify(data.toString('latin1', start, Math.min(end, start + 500)))}`)
    }
    // Fastify writes its header names in lower case: one native search finds the length.
    const named = data.indexOf(CONTENT_LENGTH, start)
    let length = named >= 0 && named < end ? readDecimal(data, named + CONTENT_LENGTH.length, end) : -1
    if (length < 0) {
      const head = data.toString('latin1', start, end) + '\r\n'
      if (CHUNKED.test(head)) {
        this.#state = State.ChunkSize
        return 0
      }
      const match = ANY_CONTENT_LENGTH.exec(head)
      if (match === null) throw new Error(`a 200 response without a length: ${JSON.stringify(head.slice(0, 500))}`)
      length = Number(match[1])
    }
    if (length === 0) return 1
    this.#remaining = length
    this.#state = State.Body
    return 0
  }

  /** Reads a chunked body's line (a size, the end of a chunk's data, a trailer); returns 1 at the body's end. */
  #line (line: string): number {
    if (this.#state === State.ChunkEnd) {
      if (line !== '') throw new Error(`a chunk's data longer than its size: ${JSON.stringify(line.slice(0, 100))}`)
      this.#state = State.ChunkSize
      return 0
    }
    if (this.#state === State.Trailer) {
      if (line !== '') return 0
      this.#state = State.Head
      return 1
    }
    const size = CHUNK_SIZE.exec(line)
    if (size === null) throw new Error(`a malformed chunk size: ${JSON.stringify(line.slice(0, 100))}`)
    this.#remaining = Number.parseInt(size[1], 16)
    this.#state = this.#remaining === 0 ? State.Trailer : State.ChunkData
    return 0
  }

  #keep (rest: Buffer): void {
    if (rest.length > MAX_LINE_BYTES) throw new Error(`a response head or chunk line over ${MAX_LINE_BYTES} bytes`)
    this.#rest = Buffer.from(rest)
  }
}

/** The decimal number after optional blanks at `at`, ended by CR; -1 when there is none. */
function readDecimal (data: Buffer, at: number, end: number): number {
  let index = at
  while (index < end && (data[index] === 0x20 || data[index] === 0x09)) index++
  let value = 0
  const first = index
  for (; index < end; index++) {
    const digit = data[index] - DIGIT_0
    if (digit < 0 || digit > 9) break
    value = value * 10 + digit
  }
  while (index < end && (data[index] === 0x20 || data[index] === 0x09)) index++
  return index === first || (index < end && data[index] !== 0x0d) ? -1 : value
}

/** Sends the request as the options say; resolves once every request sent is answered. */
export async function runPipelinedLoad (options: PipelinedLoadOptions): Promise<PipelinedLoadResult> {
  const { hostname, port, host } = new URL(options.url)
  const pipelining = options.pipelining ?? 1
  if (options.amount === undefined && options.durationSeconds === undefined) throw new Error('a load needs a duration or an amount')
  const request = encodeRequest(options.request, host)
  // `batches[n]`: n requests in one buffer, written at once for the n responses one read completed.
  const batches = Array.from({ length: pipelining + 1 }, (_, count) => Buffer.concat(Array.from({ length: count }, () => request)))
  const timeoutMs = (options.timeoutSeconds ?? 30) * 1000
  const sockets: net.Socket[] = []
  let unsent = options.amount ?? Number.POSITIVE_INFINITY
  // The first requests go out on every connection however late it connects: each answers some.
  let sending = true
  let inFlight = 0
  let connected = 0
  let completed = 0
  let lastResponse = 0n
  let progressed = true
  let done = false

  const cpuBefore = process.cpuUsage()
  const started = process.hrtime.bigint()
  return await new Promise<PipelinedLoadResult>((resolve, reject) => {
    const timers = [setInterval(() => {
      if (!progressed && inFlight > 0) fail(new Error(`no response within ${timeoutMs / 1000} s (${inFlight} in flight)`))
      progressed = false
    }, timeoutMs)]
    if (options.durationSeconds !== undefined) {
      timers.push(setTimeout(() => {
        sending = false
        finishIfAnswered()
      }, options.durationSeconds * 1000))
    }
    const settle = () => {
      done = true
      for (const timer of timers) clearTimeout(timer)
      for (const socket of sockets) socket.destroy()
    }
    const fail = (error: Error) => {
      if (done) return
      settle()
      reject(new Error(`load on ${options.request.method} ${options.request.path}: ${error.message}`))
    }
    const finish = () => {
      if (done) return
      settle()
      const cpu = process.cpuUsage(cpuBefore)
      const cpuMicros = cpu.user + cpu.system
      if (completed === 0) return reject(new Error(`load on ${options.request.method} ${options.request.path}: no request sent`))
      const seconds = Number(lastResponse - started) / 1e9
      resolve({ completed, seconds, requestsPerSecond: completed / seconds, cpuMicros, cpuMicrosPerRequest: cpuMicros / completed })
    }
    const finishIfAnswered = () => {
      if (inFlight === 0 && connected === sockets.length && (!sending || unsent === 0)) finish()
    }
    /** Sends up to `wanted` requests on `socket`; returns how many. */
    const send = (socket: net.Socket, wanted: number): number => {
      const count = Math.min(wanted, unsent)
      if (count <= 0) return 0
      unsent -= count
      inFlight += count
      socket.write(batches[count])
      return count
    }
    for (let index = 0; index < options.connections; index++) {
      const counter = new ResponseCounter()
      let outstanding = 0
      // Every read lands in one buffer per connection: no Buffer and no 'data' event per read.
      const readBuffer = Buffer.allocUnsafe(READ_BUFFER_BYTES)
      const socket: net.Socket = net.connect({
        host: hostname,
        port: Number(port),
        noDelay: true,
        onread: { buffer: readBuffer, callback: (length) => { onRead(readBuffer, length); return true } }
      })
      sockets.push(socket)
      socket.once('connect', () => {
        connected++
        outstanding += send(socket, pipelining)
        finishIfAnswered()
      })
      const onRead = (buffer: Buffer, length: number) => {
        let answered: number
        try {
          answered = counter.feed(buffer, length)
        } catch (error) {
          return fail(error as Error)
        }
        if (answered === 0) return
        outstanding -= answered
        if (outstanding < 0) return fail(new Error('more responses than requests on a connection'))
        completed += answered
        inFlight -= answered
        progressed = true
        lastResponse = process.hrtime.bigint()
        if (sending) outstanding += send(socket, answered)
        finishIfAnswered()
      }
      socket.on('error', (error) => fail(error))
      socket.on('close', () => fail(new Error('a connection closed by the server')))
    }
  })
}
