/**
 * Triton's generate extension as its QA pins it (qa/L0_http/generate_endpoint_test.py), against
 * the example's `mock_llm` over a real listen: text in and out, request ids, streams of several
 * responses, none, or an error mid-stream, the errors of missing and mistyped inputs and of the
 * `parameters` keyword, and a client that leaves while the model waits.
 */
import type { FastifyInstance } from 'fastify'
import t, { type Test } from 'tap'
import { mockLlm } from '../example/generate-models'
import type { Model } from '../example/models'
import { buildServer, type ServerOptions } from '../example/server'
import { EventReader, postGenerate, sseEvents } from './helpers/event-stream'
import { eventually } from './helpers/sync'

const TEXT = 'hello world'
const HEAD = { model_name: 'mock_llm', model_version: '1' }

async function startExample (t: Test, options: ServerOptions = {}): Promise<{ app: FastifyInstance, port: number }> {
  const app = await buildServer({ fastify: { logger: false }, models: new Map([['mock_llm', mockLlm]]), ...options })
  t.teardown(() => app.close())
  await app.listen({ host: '127.0.0.1', port: 0 })
  return { app, port: (app.server.address() as { port: number }).port }
}

const generate = (port: number, body: string | object, route = 'generate', model = 'mock_llm') =>
  postGenerate(port, `/v2/models/${model}/${route}`, body)

/** Asserts a JSON error answer of both routes, as the QA's generate_expect_failure does. */
async function expectFailure (t: Test, port: number, body: string | object, status: number, message: string): Promise<void> {
  for (const route of ['generate', 'generate_stream']) {
    const response = await generate(port, body, route)
    t.equal(response.statusCode, status, `${route}: ${status}`)
    t.equal(response.headers['content-type'], 'application/json', `${route}: a JSON error`)
    t.same(JSON.parse(response.body), { error: message }, `${route}: ${message}`)
  }
}

t.test('generate: the prompt back as TEXT, with the request id when it has one', async (t) => {
  const { port } = await startExample(t)
  const plain = await generate(port, { PROMPT: TEXT, STREAM: false })
  t.equal(plain.statusCode, 200)
  t.equal(plain.headers['content-type'], 'application/json', 'exactly application/json, as Triton')
  t.equal(plain.body, '{"TEXT":"hello world","model_name":"mock_llm","model_version":"1"}', 'the keys in Triton\'s (sorted) order')
  const allInputs = await generate(port, { PROMPT: TEXT, STREAM: false, input_ids: [100, 200] })
  t.same(JSON.parse(allInputs.body), { TEXT, ...HEAD }, 'the optional input too')
  t.same(JSON.parse((await generate(port, { PROMPT: TEXT, id: '42', STREAM: false })).body), { TEXT, id: '42', ...HEAD }, 'the id')
  t.same(JSON.parse((await generate(port, { PROMPT: TEXT, id: '', STREAM: false })).body), { TEXT, ...HEAD }, 'an empty id is not returned')
  t.same(JSON.parse((await generate(port, { PROMPT: TEXT, STREAM: false, OUTPUT_0_DIM: true })).body), { TEXT: [], ...HEAD },
    'an output of no element is an empty array')
  const versioned = await postGenerate(port, '/v2/models/mock_llm/versions/1/generate', { PROMPT: TEXT, STREAM: false })
  t.same(JSON.parse(versioned.body), { TEXT, ...HEAD }, 'at the version route')
  const stream = await generate(port, { PROMPT: TEXT, STREAM: false }, 'generate_stream')
  t.equal(stream.headers['content-type'], 'text/event-stream; charset=utf-8')
  t.same(sseEvents(stream.body), [{ TEXT, ...HEAD }], 'one event over generate_stream')
})

t.test('generate_stream: one event per response; generate needs exactly one', async (t) => {
  const { port } = await startExample(t)
  const three = await generate(port, { PROMPT: [TEXT], STREAM: true, REPETITION: 3 }, 'generate_stream')
  t.equal(three.statusCode, 200)
  t.same(sseEvents(three.body), [{ TEXT, ...HEAD }, { TEXT, ...HEAD }, { TEXT, ...HEAD }], 'three events')
  const nested = await generate(port, { PROMPT: [TEXT], STREAM: true, parameters: { REPETITION: 2 } }, 'generate_stream')
  t.equal(sseEvents(nested.body).length, 2, 'a parameter under "parameters"')
  const none = await generate(port, { PROMPT: TEXT, STREAM: true, REPETITION: 0 }, 'generate_stream')
  t.equal(none.statusCode, 200)
  t.equal(none.body, '', 'no response: a stream of no event')
  const oneThenFinal = await generate(port, { PROMPT: TEXT, STREAM: true })
  t.same(JSON.parse(oneThenFinal.body), { TEXT, ...HEAD }, 'generate: one response, then the final flag alone')
  const count = 'generate expects model to produce exactly 1 response, use generate stream for model that generates various number of responses'
  for (const repetition of [0, 2]) {
    const response = await generate(port, { PROMPT: TEXT, STREAM: true, REPETITION: repetition })
    t.equal(response.statusCode, 500, `${repetition} responses`)
    t.same(JSON.parse(response.body), { error: count })
  }
})

t.test('generate_stream: an error of the run is its last event, with its status when it is the first', async (t) => {
  const { port } = await startExample(t)
  const first = await generate(port, { PROMPT: [TEXT], STREAM: true, REPETITION: 0, FAIL_LAST: true }, 'generate_stream')
  t.equal(first.statusCode, 500, 'the error\'s status')
  t.equal(first.headers['content-type'], 'text/event-stream; charset=utf-8')
  t.same(sseEvents(first.body), [{ error: 'An Error Occurred' }])
  const after = await generate(port, { PROMPT: [TEXT], STREAM: true, REPETITION: 1, FAIL_LAST: true }, 'generate_stream')
  t.equal(after.statusCode, 200, 'the first response set it')
  t.same(sseEvents(after.body), [{ TEXT, ...HEAD }, { error: 'An Error Occurred' }])
  const failed = await generate(port, { PROMPT: [TEXT], STREAM: true, REPETITION: 0, FAIL_LAST: true })
  t.equal(failed.statusCode, 500, 'generate: the error')
  t.same(JSON.parse(failed.body), { error: 'An Error Occurred' })
})

t.test('errors of a generate request, as Triton words them, before the model runs', async (t) => {
  const { port } = await startExample(t)
  const missing = (count: number, given: string, left: string) =>
    `expected number of inputs between 2 and 3 but got ${count} inputs for model 'mock_llm'. Got input(s) ${given}, ` +
    `but missing required input(s) ${left}. Please provide all required input(s).`
  await expectFailure(t, port, {}, 400, missing(0, '[]', "['PROMPT','STREAM']"))
  await expectFailure(t, port, { abc: 123 }, 400, missing(0, '[]', "['PROMPT','STREAM']"))
  await expectFailure(t, port, { PROMPT: 'hello' }, 400, missing(1, "['PROMPT']", "['STREAM']"))
  await expectFailure(t, port, { STREAM: false, other: 'param' }, 400, missing(1, "['STREAM']", "['PROMPT']"))
  const bytes = 'Unable to parse JSON bytes array: attempt to access JSON non-string as string'
  const bool = "Unable to parse 'data': attempt to access JSON non-boolean as boolean"
  await expectFailure(t, port, { PROMPT: 123, STREAM: false }, 400, bytes)
  await expectFailure(t, port, { PROMPT: 'hello', STREAM: 'false' }, 400, bool)
  await expectFailure(t, port, { PROMPT: true, STREAM: 123 }, 400, bytes)
  await expectFailure(t, port, { STREAM: 123, PROMPT: true }, 400, bool)
  await expectFailure(t, port, { PROMPT: { USER: 'hello', BOT: 'world' }, STREAM: true }, 400, bytes)
  await expectFailure(t, port, { PROMPT: 'hello', STREAM: false, parameters: { PROMPT: 'again' } }, 400, "input 'PROMPT' already exists in request")
  await expectFailure(t, port, { PROMPT: 'hello', STREAM: true, PARAMS: { PARAM_0: 0 } }, 400,
    "parameter 'PARAMS' has invalid type. It should be either 'int', 'bool', or 'string'.")
  await expectFailure(t, port, { PROMPT: [TEXT], STREAM: true, parameters: 1 }, 400,
    "Expected JSON object for keyword: 'parameters': attempt to access JSON non-object as object")
  await expectFailure(t, port, { PROMPT: [TEXT], STREAM: true, parameters: { nested: { twice: 1 } } }, 400,
    "Converting keyword: 'parameters': parameter 'nested' has invalid type. It should be either 'int', 'bool', or 'string'.")
  await expectFailure(t, port, { PROMPT: 'hello', STREAM: false, id: 42 }, 400, "Unable to parse 'id': attempt to access JSON non-string as string")
  await expectFailure(t, port, { PROMPT: ['a', 'b'], STREAM: false }, 400, "The schema can not convert input 'PROMPT' to tensor with proper shape")
  await expectFailure(t, port, '{"PROMPT": "hel', 400, 'Unable to parse inference request: the JSON is not valid')
  await expectFailure(t, port, '[1]', 400, 'Unable to parse inference request: the body must be a JSON object')
  await expectFailure(t, port, '', 400, 'Unable to parse inference request: the body must be a JSON object')
  const unknown = await generate(port, { PROMPT: TEXT, STREAM: false }, 'generate', 'no_such_model')
  t.equal(unknown.statusCode, 404)
  t.same(JSON.parse(unknown.body), { error: "Request for unknown model: 'no_such_model' is not found" })
  const version = await postGenerate(port, '/v2/models/mock_llm/versions/2/generate_stream', { PROMPT: TEXT, STREAM: false })
  t.equal(version.statusCode, 404)
  t.same(JSON.parse(version.body), { error: "Request for unknown model: 'mock_llm' version 2 is not found" })
})

t.test('a body past the input size limit is refused in Triton\'s words, however it says its JSON ends', async (t) => {
  const { port } = await startExample(t, { jsonLimit: 1024 })
  const body = JSON.stringify({ PROMPT: 'x'.repeat(2000), STREAM: false })
  const tooLarge = `request JSON size of ${body.length} bytes exceeds the maximum allowed input size of 1024 bytes. Use --http-max-input-size to increase the limit.`
  const declared = await postGenerate(port, '/v2/models/mock_llm/generate', body, { 'Inference-Header-Content-Length': '100' })
  t.equal(declared.statusCode, 400)
  t.same(JSON.parse(declared.body), { error: tooLarge }, 'refused by its Content-Length')
  t.equal(declared.headers.connection, 'close', 'and its connection closed: the client sends the body anyway')
  const chunked = await postGenerate(port, '/v2/models/mock_llm/generate_stream', body, { 'Transfer-Encoding': 'chunked' })
  t.equal(chunked.statusCode, 400)
  t.same(JSON.parse(chunked.body), { error: tooLarge }, 'a chunked one once read')
  // 2 bytes of JSON an element, 4 once typed as INT32.
  const typed = await generate(port, { PROMPT: 'a', STREAM: false, input_ids: new Array(300).fill(1) })
  t.same(JSON.parse(typed.body), {
    error: "request size of 6 bytes with input 'input_ids' of size 1200 bytes exceeds the maximum allowed input size of 1024. " +
      'Use --http-max-input-size to increase the limit.'
  }, 'what the inputs take once typed is bounded too')
  const fits = await generate(port, { PROMPT: 'x'.repeat(800), STREAM: false })
  t.equal(fits.statusCode, 200, 'under the limit')
})

t.test('a client that leaves mid-stream: the model stops at its next response, and the stream ends', async (t) => {
  let reached!: () => void
  const atModel = new Promise<void>((resolve) => { reached = resolve })
  let ended!: (error: unknown) => void
  const runEnded = new Promise<unknown>((resolve) => { ended = resolve })
  const watched: Model = {
    ...mockLlm,
    async execute (infer) {
      reached()
      try {
        await mockLlm.execute?.(infer)
        ended(undefined)
      } catch (error) {
        ended(error)
        throw error
      }
    }
  }
  const { app, port } = await startExample(t, { models: new Map([['mock_llm', watched]]) })
  // Each response after a wait that only the client's leaving ends.
  const reader = new EventReader(t, port, '/v2/models/mock_llm/generate_stream', { PROMPT: [TEXT], STREAM: true, REPETITION: 3, DELAY: 3600 })
  await atModel
  reader.request.destroy()
  t.match(await runEnded, { name: 'AbortError' }, 'the model\'s wait ended by the client\'s leaving')
  // The model's error reaches the table a few turns after the model sees it.
  const failures = async () => (await app.inject('/v2/models/mock_llm/stats')).json().model_stats[0].inference_stats.fail.count
  await eventually(async () => await failures() > 0, 'the request counted as failed')
  t.equal(await failures(), 1, 'counted as a failed request')
  t.equal(app.systemSharedMemory.inFlight.heldBytes, 0, 'what it held is given back')
})
