/**
 * The generate extension of the model routes over a real listen, with models declared here: how a
 * request's keys become inputs of every datatype (shaped as Triton pads them) and parameters, the
 * response's fields, the version route and the restricted API, what a request is charged, a
 * compressed body, a model's own failure, and a stream held back by a client that reads slowly or
 * dropped when it stops reading.
 */
import { once } from 'node:events'
import http from 'node:http'
import { gzipSync } from 'node:zlib'
import Fastify, { type FastifyInstance } from 'fastify'
import t, { type Test } from 'tap'
import fastifyTritonShm, { type FastifyTritonShmOptions, type InferRequest, kserveModels, type KServeModelsOptions, type ModelDeclaration, ModelTable } from '../lib/index'
import type { BytesElements } from '../types/kserve'
import { EventReader, postGenerate, sseEvents } from './helpers/event-stream'
import { eventually } from './helpers/sync'

interface Served { app: FastifyInstance, port: number, table: ModelTable }

async function serve (t: Test, declarations: ModelDeclaration[], options: Omit<KServeModelsOptions, 'models'> = {},
  pluginOptions: FastifyTritonShmOptions = {}): Promise<Served> {
  const table = new ModelTable(declarations)
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(fastifyTritonShm, pluginOptions)
  await app.register(kserveModels, { models: table, ...options })
  await app.listen({ host: '127.0.0.1', port: 0 })
  return { app, table, port: (app.server.address() as { port: number }).port }
}

/** Its inputs back, the parameters it was given (as JSON), and an output named as a field of the response. */
const echo: ModelDeclaration = {
  name: 'echo',
  versions: ['1', '2'],
  inputs: [
    { name: 'U', datatype: 'UINT16', shape: [-1] },
    { name: 'F', datatype: 'FP32', shape: [2, -1] },
    { name: 'I', datatype: 'INT64', shape: [-1, -1], optional: true },
    { name: 'S', datatype: 'BYTES', shape: [2], optional: true }
  ],
  outputs: [
    { name: 'U', datatype: 'UINT16', shape: [-1] },
    { name: 'F', datatype: 'FP32', shape: [2, -1] },
    { name: 'BIG', datatype: 'INT64', shape: [1] },
    { name: 'PARAMS', datatype: 'BYTES', shape: [1] },
    { name: 'model_name', datatype: 'BYTES', shape: [1] },
    { name: 'SHAPES', datatype: 'BYTES', shape: [1] }
  ],
  run (infer) {
    for (const name of ['U', 'F']) {
      const input = infer.input<Uint16Array>(name)
      infer.output<Uint16Array>(name, input.shape).set(input.data)
    }
    infer.output<BigInt64Array>('BIG', [1])[0] = 2n ** 62n + 1n
    infer.output<Buffer[]>('PARAMS', [1])[0] = Buffer.from(JSON.stringify(infer.parameters))
    infer.output<Buffer[]>('model_name', [1])[0] = Buffer.from('not the model name')
    infer.output<Buffer[]>('SHAPES', [1])[0] = Buffer.from(JSON.stringify(Object.fromEntries(infer.inputs.map(({ name, shape }) => [name, shape]))))
  }
}

const echoBody = { U: [1, 2, 3], F: [1.5, 2.5, 3.5, 4.5] }

const parse = (body: string) => JSON.parse(body) as Record<string, unknown>

t.test('keys are inputs or parameters; the response has each output, its keys sorted', async (t) => {
  const { app, port } = await serve(t, [echo])
  const response = await postGenerate(port, '/v2/models/echo/generate', {
    ...echoBody, id: '7', temperature: 0.5, parameters: { stream: false, top_k: 3, S: ['a', 'b'] }, binary_data_output: 'yes'
  })
  t.equal(response.statusCode, 200)
  t.equal(response.body,
    '{"BIG":4611686018427387905,"F":[1.5,2.5,3.5,4.5],"PARAMS":"{\\"id\\":\\"7\\",\\"temperature\\":0.5,\\"stream\\":false,\\"top_k\\":3}",' +
    '"SHAPES":"{\\"U\\":[3],\\"F\\":[2,2],\\"S\\":[2]}","U":[1,2,3],"id":"7","model_name":"echo","model_version":"2"}',
    'every output as JSON, one element as itself, 64-bit integers exact; an output named as a field is left out; binary_data_output is not passed on')
  const versioned = await postGenerate(port, '/v2/models/echo/versions/1/generate', echoBody)
  t.equal(parse(versioned.body).model_version, '1', 'the version named')
  const stats = (await app.inject('/v2/models/echo/stats')).json()
  t.same(stats.model_stats.map(({ version, inference_stats: { success } }: { version: string, inference_stats: { success: { count: number } } }) =>
    [version, success.count]), [['1', 1], ['2', 1]], 'each counted in its version\'s statistics')
})

t.test('a compressed body is inflated, within the input size limit', async (t) => {
  const { port } = await serve(t, [echo], { jsonLimit: 1000 })
  const send = (body: Buffer) => new Promise<{ statusCode: number, body: string }>((resolve, reject) => {
    const request = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/v2/models/echo/generate', headers: { 'content-encoding': 'gzip' } }, (response) => {
      let text = ''
      response.on('data', (chunk: Buffer) => { text += chunk.toString() })
      response.on('end', () => resolve({ statusCode: response.statusCode as number, body: text }))
    })
    request.on('error', reject)
    request.end(body)
  })
  const inflated = await send(gzipSync(JSON.stringify(echoBody)))
  t.same(parse(inflated.body).U, [1, 2, 3], 'inflated, then read')
  const bomb = await send(gzipSync(JSON.stringify({ ...echoBody, pad: 'x'.repeat(5000) })))
  t.equal(bomb.statusCode, 400, 'inflating past the limit: refused')
})

t.test('values are typed and shaped as Triton reads them, or refused in its words', async (t) => {
  const { port } = await serve(t, [echo, { ...echo, name: 'keyword', inputs: [...echo.inputs, { name: 'parameters', datatype: 'BYTES', shape: [1] }] }])
  const refused = async (body: object, message: string, model = 'echo') => {
    const response = await postGenerate(port, `/v2/models/${model}/generate`, body)
    t.equal(response.statusCode, 400)
    t.same(parse(response.body), { error: message })
  }
  const shaped = await postGenerate(port, '/v2/models/echo/generate', { ...echoBody, I: [1, 2, 3] })
  t.same(JSON.parse(parse(shaped.body).SHAPES as string), { U: [3], F: [2, 2], I: [1, 3] }, 'fixed dimensions take their share, the innermost -1 the rest, any other -1 is 1')
  await refused({ ...echoBody, U: [1, -2] }, "Unable to parse 'data': attempt to access JSON non-unsigned-integer as unsigned-integer")
  await refused({ ...echoBody, U: [1.5] }, "Unable to parse 'data': attempt to access JSON non-unsigned-integer as unsigned-integer")
  await refused({ ...echoBody, F: [1, 2, 'x', 4] }, "Unable to parse 'data': attempt to access JSON non-number as double")
  await refused({ ...echoBody, I: [1.5] }, "Unable to parse 'data': attempt to access JSON non-signed-integer as signed-integer")
  await refused({ ...echoBody, U: [[1, 2]] }, "Unable to parse 'data': attempt to access JSON non-unsigned-integer as unsigned-integer")
  await refused({ ...echoBody, F: [1, 2, 3] }, "The schema can not convert input 'F' to tensor with proper shape")
  await refused({ ...echoBody, S: ['a', 'b', 'c'] }, "The schema can not convert input 'S' to tensor with proper shape")
  await refused({ ...echoBody, parameters: {} }, "Keyword 'parameters' for nested schema also given as input tensor name", 'keyword')
  await refused({ ...echoBody, parameters: { U: [1, 2] } }, "input 'U' already exists in request")
  await refused({ ...echoBody, parameters: { S: ['a', 2] } }, "Converting keyword: 'parameters': Unable to parse JSON bytes array: attempt to access JSON non-string as string")
})

t.test('generate routes are the restricted category "inference"', async (t) => {
  const restrictedApis = [{ categories: ['inference' as const], header: 'x-key', value: 'v' }]
  const { port } = await serve(t, [echo], { restrictedApis })
  for (const route of ['generate', 'generate_stream']) {
    const refused = await postGenerate(port, `/v2/models/echo/${route}`, echoBody)
    t.equal(refused.statusCode, 403, `${route}: without the header`)
    t.same(parse(refused.body), { error: "This API is restricted, expecting header 'x-key'" })
    const allowed = await postGenerate(port, `/v2/models/echo/${route}`, echoBody, { 'x-key': 'v' })
    t.equal(allowed.statusCode, 200, `${route}: with it`)
  }
})

t.test('a request is charged to the in-flight budget: its body, then its JSON parsed', async (t) => {
  const { app, port } = await serve(t, [echo], {}, { maxInFlightBytes: 20_000 })
  const small = await postGenerate(port, '/v2/models/echo/generate', echoBody)
  t.equal(small.statusCode, 200)
  const body = JSON.stringify({ ...echoBody, pad: 'x'.repeat(2000) })
  const large = await postGenerate(port, '/v2/models/echo/generate', body)
  t.equal(large.statusCode, 400)
  // The body as it arrived (its length), then 12 times it before its JSON is parsed.
  t.same(parse(large.body), {
    error: `this request needs ${13 * body.length} bytes in flight, more than the server holds for all requests together (20000): send tensors in shared memory`
  }, 'its parsed JSON would not fit')
  t.equal(app.systemSharedMemory.inFlight.heldBytes, 0, 'nothing held after')
})

t.test('a model\'s own failure: its status and message if it has them, a bare 500 if not; admission refusals as JSON', async (t) => {
  const failing = (name: string, error: Error): ModelDeclaration => ({
    name,
    inputs: [{ name: 'N', datatype: 'INT32', shape: [1] }],
    outputs: [{ name: 'N', datatype: 'INT32', shape: [1] }],
    decoupled: true,
    async run (infer) {
      for (let sent = 0; sent < infer.input<Int32Array>('N').data[0]; sent++) {
        infer.output<Int32Array>('N', [1])[0] = sent
        await infer.send()
      }
      throw error
    }
  })
  const { port } = await serve(t, [failing('internal', new Error('a path the client must not see')), failing('declined', Object.assign(new Error('no'), { statusCode: 422 }))], {
    beforeRun: (request) => { if (request.headers['x-refuse'] !== undefined) throw Object.assign(new Error('refused'), { statusCode: 429 }) }
  })
  const first = await postGenerate(port, '/v2/models/internal/generate_stream', { N: 0 })
  t.equal(first.statusCode, 500)
  t.same(sseEvents(first.body), [{ error: 'Internal Server Error' }], 'its message is not sent')
  const later = await postGenerate(port, '/v2/models/declined/generate_stream', { N: 2 })
  t.equal(later.statusCode, 200)
  t.same(sseEvents(later.body).map((event) => (event as Record<string, unknown>).N ?? event), [0, 1, { error: 'no' }])
  const declined = await postGenerate(port, '/v2/models/declined/generate', { N: 0 })
  t.equal(declined.statusCode, 422)
  t.same(parse(declined.body), { error: 'no' })
  const admission = await postGenerate(port, '/v2/models/declined/generate_stream', { N: 1 }, { 'x-refuse': '1' })
  t.equal(admission.statusCode, 429, 'refused before the run: answered as JSON')
  t.equal(admission.headers['content-type'], 'application/json')
  t.same(parse(admission.body), { error: 'refused' })
})

/** A decoupled model sending COUNT responses of SIZE bytes each, noting when a send did not
 * complete at once (the client is not taking them), and how its run ended. */
function chunky (): { declaration: ModelDeclaration, held: Promise<void>, ended: Promise<unknown> } {
  let held!: () => void
  let ended!: (outcome: unknown) => void
  const result = {
    held: new Promise<void>((resolve) => { held = resolve }),
    ended: new Promise<unknown>((resolve) => { ended = resolve })
  }
  const declaration: ModelDeclaration = {
    name: 'chunky',
    inputs: [{ name: 'COUNT', datatype: 'UINT32', shape: [1] }, { name: 'TEXT', datatype: 'BYTES', shape: [1] }],
    outputs: [{ name: 'TEXT', datatype: 'BYTES', shape: [1] }],
    decoupled: true,
    async run (infer: InferRequest) {
      const count = infer.input<Uint32Array>('COUNT').data[0]
      const text = Buffer.from((infer.input<BytesElements>('TEXT').data.at(0) as Buffer).toString().repeat(1 << 20))
      try {
        for (let sent = 0; sent < count; sent++) {
          infer.output<Buffer[]>('TEXT', [1])[0] = text
          const sending = infer.send()
          // A send the client can take completes within microtasks; one it cannot waits for I/O.
          const done = await Promise.race([sending.then(() => true), new Promise<boolean>((resolve) => setImmediate(() => resolve(false)))])
          if (!done) {
            held()
            await sending
          }
        }
        ended('completed')
      } catch (error) {
        ended(error)
        throw error
      }
    }
  }
  return { declaration, ...result }
}

t.test('a client that reads slowly holds the model back; it gets every event once it reads', async (t) => {
  const model = chunky()
  const { port } = await serve(t, [model.declaration])
  const request = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/v2/models/chunky/generate_stream' })
  t.teardown(() => { request.destroy() })
  request.end(JSON.stringify({ COUNT: 40, TEXT: 'x' }))
  const [response] = await once(request, 'response') as [http.IncomingMessage]
  // Nothing read until the model is held back.
  const outcome = await Promise.race([model.held.then(() => 'held'), model.ended])
  t.equal(outcome, 'held', 'a send waited for the client')
  let text = ''
  response.setEncoding('utf8')
  for await (const chunk of response) text += chunk as string
  const events = sseEvents(text) as Array<{ TEXT: string }>
  t.equal(events.length, 40, 'every event')
  t.ok(events.every(({ TEXT }) => TEXT.length === 1 << 20), 'each whole')
  t.equal(await model.ended, 'completed')
})

t.test('a client that stops reading is dropped after the send timeout; one that leaves ends the run', async (t) => {
  const model = chunky()
  const { app, table, port } = await serve(t, [model.declaration], { limits: { sendTimeoutMs: 50 } })
  const request = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/v2/models/chunky/generate_stream' })
  request.on('error', () => {})
  // A response nobody reads (without a listener, Node would read and discard it).
  request.on('response', () => {})
  t.teardown(() => { request.destroy() })
  request.end(JSON.stringify({ COUNT: 40, TEXT: 'x' }))
  await model.held
  t.match(await model.ended, { code: 'ERR_SHM_CLIENT_CLOSED_REQUEST' }, 'the model\'s next send fails: the client is gone')
  // The model's error reaches the table a few turns after the model sees it.
  const failures = () => table.statistics('chunky').model_stats[0].inference_stats.fail.count
  await eventually(() => failures() > 0, 'the request counted as failed')
  t.equal(failures(), 1, 'a failed request')
  t.equal(app.systemSharedMemory.inFlight.heldBytes, 0, 'what it held is given back')

  const leaving = chunky()
  const other = await serve(t, [leaving.declaration])
  const reader = new EventReader(t, other.port, '/v2/models/chunky/generate_stream', { COUNT: 1000, TEXT: 'y' })
  t.match(await reader.next(), { TEXT: /^y+$/ }, 'a first event')
  reader.request.destroy()
  t.match(await leaving.ended, { code: 'ERR_SHM_CLIENT_CLOSED_REQUEST' }, 'the client left: the run ends at its next send')
  t.equal(other.app.systemSharedMemory.inFlight.heldBytes, 0, 'what it held is given back')
})
