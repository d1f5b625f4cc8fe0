/**
 * The bench's lean load generator (bench/pipelined-load.ts) against a real Fastify listen: it
 * counts exactly the responses the server sent, by content-length or chunked, and fails loudly
 * on a status other than 200, a malformed response or a connection the server closes.
 */
import { createServer } from 'node:net'
import { once } from 'node:events'
import { Readable } from 'node:stream'
import Fastify from 'fastify'
import t, { type Test } from 'tap'
import { ResponseCounter, runPipelinedLoad } from '../bench/pipelined-load'
import { listenLocally } from './helpers/slow-client'

async function countingApp (t: Test) {
  const app = Fastify()
  const served = { count: 0 }
  app.addHook('onRequest', async () => { served.count++ })
  app.post('/ok', async (request) => ({ echoed: request.body }))
  app.get('/empty', async (_request, reply) => reply.send())
  app.post('/chunked', async (_request, reply) => reply.type('text/plain').send(Readable.from(['a', 'bb', 'ccc'])))
  app.post('/fail', async (_request, reply) => reply.code(500).send({ error: 'refused' }))
  const url = `http://127.0.0.1:${await listenLocally(t, app)}`
  return { url, served }
}

const post = (path: string) => ({ method: 'POST' as const, path, headers: { 'content-type': 'application/json' }, body: '{"n":1}' })

t.test('counts every response of an amount, pipelined over several connections', async (t) => {
  const { url, served } = await countingApp(t)
  const result = await runPipelinedLoad({ url, request: post('/ok'), connections: 3, pipelining: 4, amount: 101 })
  t.equal(result.completed, 101)
  t.equal(served.count, 101, 'the server received exactly the amount')
  t.ok(result.cpuMicros > 0 && result.cpuMicrosPerRequest === result.cpuMicros / 101, 'its own CPU per request')
})

t.test('counts chunked responses and empty ones', async (t) => {
  const { url, served } = await countingApp(t)
  t.equal((await runPipelinedLoad({ url, request: post('/chunked'), connections: 2, pipelining: 3, amount: 37 })).completed, 37)
  t.equal((await runPipelinedLoad({ url, request: { method: 'GET', path: '/empty' }, connections: 2, pipelining: 5, amount: 23 })).completed, 23)
  t.equal(served.count, 60)
})

t.test('a duration counts what the server answered, the requests in flight at its end too', async (t) => {
  const { url, served } = await countingApp(t)
  const result = await runPipelinedLoad({ url, request: post('/ok'), connections: 2, pipelining: 4, durationSeconds: 0.05 })
  t.ok(result.completed >= 8, 'every connection\'s first requests are answered')
  t.equal(result.completed, served.count)
})

t.test('a status other than 200 fails the load, with the response\'s head', async (t) => {
  const { url } = await countingApp(t)
  await t.rejects(runPipelinedLoad({ url, request: post('/fail'), connections: 2, pipelining: 2, amount: 10 }),
    /load on POST \/fail: a response that is not a 200: "HTTP\/1\.1 500 Internal Server Error/)
})

t.test('a connection the server closes fails the load', async (t) => {
  const server = createServer((socket) => { socket.once('data', () => socket.end()) })
  t.teardown(() => server.close())
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const { port } = server.address() as { port: number }
  await t.rejects(runPipelinedLoad({ url: `http://127.0.0.1:${port}`, request: post('/ok'), connections: 1, amount: 5 }),
    /a connection closed by the server/)
})

t.test('responses are found wherever the reads cut them', async (t) => {
  const stream = Buffer.from(
    'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 12\r\n\r\n{"ok":"yes"}' +
    'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\nx-trailer: 1\r\n\r\n' +
    'HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n' +
    'HTTP/1.1 200 OK\r\ncontent-length:  2 \r\nx: y\r\n\r\nhi')
  t.equal(new ResponseCounter().feed(stream), 4, 'in one read')
  const byteByByte = new ResponseCounter()
  let completed = 0
  for (let index = 0; index < stream.length; index++) completed += byteByByte.feed(stream.subarray(index, index + 1))
  t.equal(completed, 4, 'a byte at a time')
})

t.test('a malformed response throws', async (t) => {
  const feed = (text: string) => () => new ResponseCounter().feed(Buffer.from(text))
  t.throws(feed('HTTP/1.1 200 OK\r\nconnection: close\r\n\r\nbody'), /a 200 response without a length/)
  t.throws(feed('HTTP/1.1 200 OK\r\ncontent-length: 1x\r\n\r\nbody'), /a 200 response without a length/)
  t.throws(feed('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n'), /a malformed chunk size: "zz"/)
  t.throws(feed('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n1\r\nab\r\n'), /a chunk's data longer than its size/)
  t.throws(feed('HTTP/1.0 200 OK\r\ncontent-length: 0\r\n\r\n'), /not a 200: "HTTP\/1\.0 200 OK/)
  t.throws(feed('HTTP/1.1 200 OK\r\nx: ' + 'y'.repeat(20_000)), /a response head or chunk line over 16384 bytes/)
})

t.test('a reused read buffer\'s bytes past the read are not read', async (t) => {
  const counter = new ResponseCounter()
  const buffer = Buffer.from('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nhiHTTP/1.1 200 OK\r\n\r\n')
  const partial = 'HTTP/1.1 200 OK\r\ncontent-length: 2\r\n'.length
  t.equal(counter.feed(buffer, partial), 0, 'a head cut before its end, stale bytes after the cut')
  buffer.write('\r\nhi')
  t.equal(counter.feed(buffer, 4), 1, 'the rest of it, read into the same buffer')
  t.equal(counter.feed(Buffer.from('HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n')), 1, 'and the next response')
})
