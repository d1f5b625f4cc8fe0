/**
 * `kserveErrorHandler` on a host's inference routes: every refusal of `readInferRequest` answers
 * `{"error": message}` with its status (KServe's error shape, which clients read), a host plugin's
 * error keeps its status, and an error without one (a bug, an engine's TypeError) is a logged 500
 * that names nothing of it.
 */
import Fastify from 'fastify'
import t from 'tap'
import fastifyTritonShm, { inferResponse, kserveErrorHandler, readInferRequest, TritonError, useInferBodyParser } from '../lib/index'
import { assertError } from './helpers/http'
import { infer, makeMappedObject, registerRegion, shmInput } from './helpers/kserve'
import { LEVEL, LogCapture } from './helpers/observe'

t.test('inference routes answer every error as {"error": message}, status kept', async (t) => {
  const capture = new LogCapture()
  const app = Fastify({ logger: { level: 'info', stream: capture.stream } })
  t.teardown(() => app.close())
  await app.register(fastifyTritonShm)
  await app.register(async (inference) => {
    useInferBodyParser(inference)
    inference.setErrorHandler(kserveErrorHandler)
    inference.addHook('onRequest', async (request) => {
      if (request.headers['x-throttle'] !== undefined) throw Object.assign(new Error('Rate limit exceeded'), { statusCode: 429 })
      if (request.headers['x-busy'] !== undefined) throw new TritonError('ERR_SHM_TEST_BUSY', 'exhausted', 'too much in flight')
    })
    inference.post('/v2/models/:model/infer', async (request, reply) => {
      const inferRequest = readInferRequest(request, reply, {
        registry: app.systemSharedMemory,
        model: { name: 'echo', inputs: [{ name: 'IN', datatype: 'INT32', shape: [4] }], outputs: [] }
      })
      // A model bug: an engine error whose text must not reach the client.
      if ((inferRequest.input<Int32Array>('IN').data[0]) === 13) new Int32Array(-1).fill(0)
      return inferResponse(inferRequest, reply)
    })
  })
  const object = makeMappedObject(t, 64)
  await registerRegion(t, app, 'in', object.key, 64)

  assertError(t, await infer(app, 'echo', { inputs: [shmInput('IN', 'INT32', [4], 'nowhere', 16)] }), 404,
    "Unable to find shared memory region: 'nowhere'")
  assertError(t, await infer(app, 'echo', { inputs: [shmInput('IN', 'INT32', [4], 'in', 16, 64)] }), 400,
    "Invalid offset for shared memory region: 'in'")
  assertError(t, await infer(app, 'echo', '{"inputs": '), 400, 'Unable to parse inference request: the JSON is not valid')
  assertError(t, await infer(app, 'echo', { inputs: [] }, { 'x-throttle': '1' }), 429, 'Rate limit exceeded')
  const busy = await infer(app, 'echo', { inputs: [] }, { 'x-busy': '1' })
  assertError(t, busy, 503, 'too much in flight')
  t.equal(busy.headers['retry-after'], '1', 'a server out of capacity says when to try again')
  t.equal((await infer(app, 'echo', { inputs: [] })).headers['retry-after'], undefined, 'and only then')
  t.notOk(capture.lines.some((line) => line.level >= LEVEL.error), 'refusals are not logged as failures')

  new Int32Array(object.bytes.buffer, object.bytes.byteOffset, 1)[0] = 13
  const bug = await infer(app, 'echo', { inputs: [shmInput('IN', 'INT32', [4], 'in', 16)] })
  t.equal(bug.body, '{"error":"Internal Server Error"}', 'a bug answers 500 without its message')
  assertError(t, bug, 500, 'Internal Server Error')
  t.ok(capture.lines.some((line) => line.level === LEVEL.error && line.msg === 'request failed' &&
    (line.err as { type: string }).type === 'RangeError'), 'and is logged for the operator')
})
