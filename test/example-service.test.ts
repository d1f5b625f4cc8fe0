/**
 * The example KServe V2 service over a real socket: its discovery routes, Triton's
 * simple_http_shm_client flow through the package's client, deferred unregister while a slow
 * inference holds its regions, a client that aborts, the package's client (KServeClient,
 * SharedMemoryObject) on its own, `npm run example` as a user runs it, and the service's switches
 * for client shared memory.
 */
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { existsSync, readFileSync, statSync } from 'node:fs'
import path from 'node:path'
import Fastify, { type FastifyInstance } from 'fastify'
import t, { type Test } from 'tap'
import { randomSuffix, runClient } from '../example/client'
import { loadModels } from '../example/models'
import { buildServer, type ServerOptions } from '../example/server'
import { KServeClient, ServerError, SharedMemoryObject } from '../lib/index'
import { version } from '../package.json'
import { buildApp } from './helpers/app'
import { binaryBody, binaryInput, bytesOfValues, makeMappedObject, shmInput, shmOutput } from './helpers/kserve'
import { makeObject, objectPath, removeLeftoversOnTeardown, shmLeftovers, uniqueKey, unlinkOnTeardown } from './helpers/shm'
import { killGroup } from './helpers/process-group'
import { startServiceProcess } from './helpers/service-process'
import { bounded, Gate, whenEvent } from './helpers/sync'

const ROOT = path.join(__dirname, '..')
const SYSTEM = '/v2/systemsharedmemory'

/** Listens on 127.0.0.1 on a free port; closed on teardown. Returns the app and its base URL. */
async function listen (t: Test, app: FastifyInstance): Promise<string> {
  t.teardown(() => app.close())
  await app.listen({ host: '127.0.0.1', port: 0 })
  const address = app.server.address()
  if (address === null || typeof address === 'string') throw new Error('no TCP address')
  return `http://127.0.0.1:${address.port}`
}

interface Example {
  app: FastifyInstance
  baseUrl: string
  /** Resolves with the error the next failing handler ends with. */
  nextError(): Promise<Error>
}

async function startExample (t: Test, options: ServerOptions = {}): Promise<Example> {
  const app = await buildServer(options)
  const waiting: Array<(error: Error) => void> = []
  app.addHook('onError', async (_request, _reply, error) => { for (const resolve of waiting.splice(0)) resolve(error) })
  const nextError = () => bounded(new Promise<Error>((resolve) => { waiting.push(resolve) }), 'no handler failed')
  return { app, baseUrl: await listen(t, app), nextError }
}

async function getJson (url: string): Promise<{ status: number, type: string | null, body: unknown }> {
  const response = await fetch(url)
  return { status: response.status, type: response.headers.get('content-type'), body: await response.json() }
}

const post = (url: string, body?: unknown, signal?: AbortSignal) =>
  fetch(url, { method: 'POST', body: body === undefined ? undefined : JSON.stringify(body), signal })

/** Resolves once the app's registry holds no region: leases end as responses close, which may
 * come after the client has read its answer. */
const untilNoRegion = (app: FastifyInstance, what: string) =>
  whenEvent(app.systemSharedMemory, 'unregister', () => app.systemSharedMemory.status().length === 0, what)

t.test('discovery: server metadata, health, model metadata', async (t) => {
  const { baseUrl } = await startExample(t)

  const server = await getJson(`${baseUrl}/v2`)
  t.equal(server.status, 200)
  t.match(server.type, /^application\/json/)
  t.same(server.body, {
    name: 'triton',
    version,
    extensions: ['classification', 'sequence', 'model_repository', 'model_repository(unload_dependents)', 'model_configuration', 'system_shared_memory', 'binary_tensor_data', 'parameters', 'statistics', 'trace', 'logging']
  })

  for (const route of ['/v2/health/live', '/v2/health/ready', '/v2/models/simple/ready', '/v2/models/simple/versions/1/ready']) {
    t.equal((await fetch(baseUrl + route)).status, 200, route)
  }

  for (const [name, datatype, shape, platform] of [['simple', 'INT32', [-1, 16], 'onnxruntime_onnx'], ['simple_string', 'BYTES', [-1, 16], 'node'],
    ['add_sub_fp32', 'FP32', [-1], 'node']] as const) {
    const metadata = await getJson(`${baseUrl}/v2/models/${name}`)
    t.equal(metadata.status, 200)
    t.same(metadata.body, {
      name,
      versions: ['1'],
      platform,
      inputs: [{ name: 'INPUT0', datatype, shape }, { name: 'INPUT1', datatype, shape }],
      outputs: [{ name: 'OUTPUT0', datatype, shape }, { name: 'OUTPUT1', datatype, shape }]
    }, `${name} metadata`)
    t.same((await getJson(`${baseUrl}/v2/models/${name}/versions/1`)).body, metadata.body)
  }
})

t.test('an unknown model is 404 {"error"} on every model route', async (t) => {
  const { baseUrl } = await startExample(t)
  const expected = { error: "Request for unknown model: 'nope' is not found" }
  for (const response of [
    await fetch(`${baseUrl}/v2/models/nope`),
    await fetch(`${baseUrl}/v2/models/nope/ready`),
    await post(`${baseUrl}/v2/models/nope/infer`, { inputs: [] }),
    await post(`${baseUrl}/v2/models/nope/versions/1/infer`, { inputs: [] })
  ]) {
    t.equal(response.status, 404, response.url)
    t.match(response.headers.get('content-type'), /^application\/json/)
    t.same(await response.json(), expected)
  }
})

t.test('runClient over gRPC too: the same flows on the example\'s gRPC listener, every result checked', async (t) => {
  const { app, baseUrl } = await startExample(t, { grpcPort: 0 })
  const suffix = randomSuffix()
  removeLeftoversOnTeardown(t, suffix)
  const { ok, transcript } = await runClient(baseUrl, { keySuffix: suffix, grpcAddress: `127.0.0.1:${app.tritonGrpc.port}` })
  t.equal(ok, true, transcript.join('\n'))
  const overGrpc = transcript.slice(transcript.findIndex((line) => line.includes('the same flows over gRPC')))
  t.equal(overGrpc.filter((line) => line.startsWith('ok ')).length, 5, 'simple, simple_string and tiny_classifier checked over gRPC')
  t.notOk(transcript.some((line) => line.startsWith('FAIL')), 'no result was wrong')
  t.same(app.systemSharedMemory.status(), [], 'every region unregistered over gRPC')
})

t.test('runClient: Triton\'s simple_http_shm_client flow, checked', async (t) => {
  const { app, baseUrl } = await startExample(t)
  const suffix = randomSuffix()
  removeLeftoversOnTeardown(t, suffix)
  // An object left by an earlier run that was killed is replaced, not an error.
  const stale = SharedMemoryObject.create(`/input_simple${suffix}`, 8)
  stale.close()
  const logged: string[] = []
  const { ok, transcript } = await runClient(baseUrl, { keySuffix: suffix, log: (line) => logged.push(line) })
  t.equal(ok, true, transcript.join('\n'))
  t.same(logged, transcript, 'every line was logged')
  t.notOk(transcript.some((line) => line.startsWith('FAIL')), 'no result was wrong')
  const line = (start: string) => transcript.find((entry) => entry.startsWith(start))
  t.equal(line('ok   OUTPUT0 = INPUT0 + INPUT1: [1,'), 'ok   OUTPUT0 = INPUT0 + INPUT1: [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]')
  t.equal(line('ok   OUTPUT1 = INPUT0 - INPUT1: [-1,'), 'ok   OUTPUT1 = INPUT0 - INPUT1: [-1,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14]')
  t.equal(line('ok   OUTPUT0 = INPUT0 + INPUT1: ["'), 'ok   OUTPUT0 = INPUT0 + INPUT1: ["1","2","3","4","5","6","7","8","9","10","11","12","13","14","15","16"]')
  t.equal(line('ok   OUTPUT1 = INPUT0 - INPUT1: ["'), 'ok   OUTPUT1 = INPUT0 - INPUT1: ["-1","0","1","2","3","4","5","6","7","8","9","10","11","12","13","14"]')
  t.ok(transcript.includes('response: {"model_name":"simple","model_version":"1","outputs":[{"name":"OUTPUT0","datatype":"INT32","shape":[1,16]},' +
    '{"name":"OUTPUT1","datatype":"INT32","shape":[1,16]}]}'), 'the simple response lists outputs without data')
  t.ok(transcript.includes('response: {"model_name":"simple_string","model_version":"1","outputs":[{"name":"OUTPUT0","datatype":"BYTES","shape":[1,16]},' +
    '{"name":"OUTPUT1","datatype":"BYTES","shape":[1,16]}]}'))
  t.ok(transcript.includes(`status: ${JSON.stringify([
    { name: `input_data${suffix}`, key: `/input_simple${suffix}`, offset: 0, byte_size: 128 },
    { name: `output_data${suffix}`, key: `/output_simple${suffix}`, offset: 0, byte_size: 128 }
  ])}`), 'both regions were listed while registered')
  t.ok(transcript.includes('unregistered; status: []'))
  t.match(line('infer simple,'), /^infer simple, inputs and outputs in shared memory \(\d+\.\d\d ms\)$/)
  t.same(app.systemSharedMemory.status(), [], 'the client unregistered everything')
  t.same(shmLeftovers(suffix), [], 'the client removed its objects, the stale one included')
})

t.test('the versioned infer route, with binary data both ways over a real socket', async (t) => {
  const { baseUrl } = await startExample(t)
  const input0 = bytesOfValues('FP32', [1, 2.5, -3])
  const input1 = bytesOfValues('FP32', [0.5, 0.5, 0.5])
  const { payload, headers } = binaryBody({
    inputs: [binaryInput('INPUT0', 'FP32', [3], 12), binaryInput('INPUT1', 'FP32', [3], 12)],
    parameters: { binary_data_output: true }
  }, [input0, input1], 'application/octet-stream')
  const response = await fetch(`${baseUrl}/v2/models/add_sub_fp32/versions/1/infer`, { method: 'POST', body: new Uint8Array(payload), headers })
  t.equal(response.status, 200)
  t.equal(response.headers.get('content-type'), 'application/octet-stream')
  const body = Buffer.from(await response.arrayBuffer())
  const headerLength = Number(response.headers.get('inference-header-content-length'))
  t.same(JSON.parse(body.subarray(0, headerLength).toString()), {
    model_name: 'add_sub_fp32',
    model_version: '1',
    outputs: [
      { name: 'OUTPUT0', datatype: 'FP32', shape: [3], parameters: { binary_data_size: 12 } },
      { name: 'OUTPUT1', datatype: 'FP32', shape: [3], parameters: { binary_data_size: 12 } }
    ]
  })
  t.same(body.subarray(headerLength), Buffer.concat([bytesOfValues('FP32', [1.5, 3, -2.5]), bytesOfValues('FP32', [0.5, 2, -3.5])]))
})

t.test('a body over bodyLimit is 413 {"error"}', async (t) => {
  const { baseUrl } = await startExample(t, { bodyLimit: 256 })
  const response = await post(`${baseUrl}/v2/models/add_sub_fp32/infer`, {
    inputs: [0, 1].map((index) => ({ name: `INPUT${index}`, datatype: 'FP32', shape: [64], data: Array(64).fill(1.25) }))
  })
  t.equal(response.status, 413)
  const body = await response.json() as Record<string, unknown>
  t.same(Object.keys(body), ['error'])
})

/** Regions `in` (INPUT0 = 0..15, INPUT1 = 1s) and `out` of the example's `simple`, registered over HTTP. */
async function simpleRegions (t: Test, baseUrl: string, suffix = '') {
  const input = makeMappedObject(t, 128, 'example_in')
  const output = makeMappedObject(t, 128, 'example_out')
  input.bytes.set(Buffer.concat([bytesOfValues('INT32', Array.from({ length: 16 }, (_, index) => index)), bytesOfValues('INT32', Array(16).fill(1))]))
  for (const [name, key] of [[`in${suffix}`, input.key], [`out${suffix}`, output.key]]) {
    const response = await post(`${baseUrl}${SYSTEM}/region/${name}/register`, { key, byte_size: 128 })
    t.equal(response.status, 200, `registered ${name}`)
  }
  const request = {
    inputs: [shmInput('INPUT0', 'INT32', [1, 16], `in${suffix}`, 64), shmInput('INPUT1', 'INT32', [1, 16], `in${suffix}`, 64, 64)],
    outputs: [shmOutput('OUTPUT0', `out${suffix}`, 64), shmOutput('OUTPUT1', `out${suffix}`, 64, 64)]
  }
  return { input, output, request }
}

const statusNames = async (baseUrl: string) =>
  ((await getJson(`${baseUrl}${SYSTEM}/status`)).body as Array<{ name: string }>).map(({ name }) => name)

t.test('unregister-all during a slow inference is deferred until its response is sent', async (t) => {
  const model = new Gate(false)
  const { app, baseUrl } = await startExample(t, { beforeModel: model.pass })
  const { output, request } = await simpleRegions(t, baseUrl)
  const inference = post(`${baseUrl}/v2/models/simple/infer`, request)
  await model.untilHeld(1, 'the inference never reached its model') // it holds its regions, and waits

  const unregister = await post(`${baseUrl}${SYSTEM}/unregister`)
  t.equal(unregister.status, 200, 'unregister-all answers at once')
  t.equal(await unregister.text(), '')
  t.same(await statusNames(baseUrl), ['in', 'out'], 'the regions in use stay listed')
  const again = await post(`${baseUrl}${SYSTEM}/region/in/register`, { key: output.key, byte_size: 8 })
  t.equal(again.status, 400)
  t.same(await again.json(), { error: "shared memory region 'in' already in manager" }, 'and keep their names')

  model.open()
  const response = await inference
  t.equal(response.status, 200)
  t.equal(await response.text(), '{"model_name":"simple","model_version":"1","outputs":[{"name":"OUTPUT0","datatype":"INT32","shape":[1,16]},' +
    '{"name":"OUTPUT1","datatype":"INT32","shape":[1,16]}]}')
  t.same(Array.from(new Int32Array(output.bytes.buffer, 0, 32)),
    [...Array.from({ length: 16 }, (_, index) => index + 1), ...Array.from({ length: 16 }, (_, index) => index - 1)],
    'the results were written into the regions')
  await untilNoRegion(app, 'the regions stayed after the response')
  t.pass('the regions went away with the response, without another call')
  t.same(await statusNames(baseUrl), [])
})

t.test('a client that aborts a slow inference releases its leases', async (t) => {
  const model = new Gate(false)
  const models = await loadModels()
  const simple = models.get('simple')!
  const execute = simple.execute as NonNullable<typeof simple.execute>
  let executed = false
  simple.execute = (infer) => {
    executed = true
    return execute(infer)
  }
  const { app, baseUrl, nextError } = await startExample(t, { beforeModel: model.pass, models })
  const { request } = await simpleRegions(t, baseUrl)
  const controller = new AbortController()
  const inference = post(`${baseUrl}/v2/models/simple/infer`, request, controller.signal).catch((error: Error) => error)
  await model.untilHeld(1, 'the inference never reached its model')

  t.equal((await post(`${baseUrl}${SYSTEM}/unregister`)).status, 200)
  t.same(await statusNames(baseUrl), ['in', 'out'], 'deferred: the inference holds both regions')
  controller.abort()
  t.match(await inference, { name: 'AbortError' }, 'the client gave up')
  await untilNoRegion(app, 'the regions stayed after the client left')
  t.equal(model.held, 1, 'the model is still held back')
  t.notOk(executed, 'while the model was still waiting: the abort released the leases, not the end of the handler')
  t.same(await statusNames(baseUrl), [])

  // The request's signal told the service the client left: the model never runs over memory that is gone.
  const failed = nextError()
  model.open()
  t.match(await failed, { kind: 'cancelled' }, 'the handler stopped with "client closed request"')
  t.notOk(executed, 'the abandoned request was dropped once its wait ended')
  t.equal((await fetch(`${baseUrl}/v2/health/live`)).status, 200, 'the service still answers')
})

t.test('KServeClient', async (t) => {
  t.test('speaks the shared memory API and infers', async (t) => {
    const { baseUrl } = await startExample(t)
    const client = new KServeClient(`${baseUrl}//`)
    const object = makeMappedObject(t, 4096, 'client')
    object.bytes.set(bytesOfValues('INT32', Array(32).fill(3)))
    t.same(await client.systemSharedMemoryStatus(), [])
    await client.registerSystemSharedMemory('a region', object.key, 128)
    await client.registerSystemSharedMemory('b', object.key, 64, 128)
    t.same(await client.systemSharedMemoryStatus('a region'), [{ name: 'a region', key: object.key, offset: 0, byte_size: 128 }],
      'a name is sent percent-encoded')
    t.same((await client.systemSharedMemoryStatus()).map(({ name }) => name), ['a region', 'b'])
    const response = await client.infer('simple', {
      inputs: [shmInput('INPUT0', 'INT32', [1, 16], 'a region', 64), shmInput('INPUT1', 'INT32', [1, 16], 'a region', 64, 64)],
      outputs: [shmOutput('OUTPUT0', 'b', 64)]
    })
    t.same(response, { model_name: 'simple', model_version: '1', outputs: [{ name: 'OUTPUT0', datatype: 'INT32', shape: [1, 16] }] })
    t.same(Array.from(new Int32Array(object.bytes.buffer, 128, 16)), Array(16).fill(6))
    await client.unregisterSystemSharedMemory('b')
    t.same((await client.systemSharedMemoryStatus()).map(({ name }) => name), ['a region'])
    await client.unregisterSystemSharedMemory()
    t.same(await client.systemSharedMemoryStatus(), [])
    await client.unregisterCudaSharedMemory()
  })

  t.test('throws a ServerError with the status and the server\'s message', async (t) => {
    const { baseUrl } = await startExample(t)
    const client = new KServeClient(baseUrl)
    const error = await client.systemSharedMemoryStatus('nope').catch((error: unknown) => error)
    t.ok(error instanceof ServerError)
    t.match(error, { name: 'ServerError', statusCode: 404, message: "Unable to find system shared memory region: 'nope'" })
    await t.rejects(client.registerSystemSharedMemory('r', uniqueKey('missing'), 64), { statusCode: 400, message: /^Unable to open shared memory region: '/ })
    await t.rejects(client.infer('simple', { inputs: [] }), { statusCode: 400, message: "expected 2 inputs but got 0 inputs for model 'simple'. Got input(s) [], but missing required input(s) ['INPUT0','INPUT1']. Please provide all required input(s)." })
    await t.rejects(client.infer('nope', { inputs: [] }), { statusCode: 404, message: "Request for unknown model: 'nope' is not found" })
  })

  t.test('sends its headers with every request', async (t) => {
    const app = await buildApp(t, { restrictedApi: { header: 'x-shm-token', value: 's3cret' } })
    const baseUrl = await listen(t, app)
    await t.rejects(new KServeClient(baseUrl).systemSharedMemoryStatus(),
      { statusCode: 403, message: "This API is restricted, expecting header 'x-shm-token'" })
    const client = new KServeClient(baseUrl, { headers: { 'x-shm-token': 's3cret' } })
    const key = makeObject(t, 4096)
    await client.registerSystemSharedMemory('r', key, 16)
    t.same(await client.systemSharedMemoryStatus(), [{ name: 'r', key, offset: 0, byte_size: 16 }])
  })

  t.test('an error body that is not {"error"} gives the status text', async (t) => {
    const app = Fastify()
    app.get(`${SYSTEM}/status`, async (_request, reply) => reply.code(502).type('text/html').send('<html>Bad Gateway</html>'))
    app.post(`${SYSTEM}/unregister`, async (_request, reply) => reply.code(503).send())
    app.post(`${SYSTEM}/region/r/unregister`, async (_request, reply) => reply.code(500).send({ message: 'not the shape' }))
    app.post('/v2/cudasharedmemory/unregister', async (_request, reply) => reply.code(500).send('null'))
    const client = new KServeClient(await listen(t, app))
    await t.rejects(client.systemSharedMemoryStatus(), { name: 'ServerError', statusCode: 502, message: 'Bad Gateway' })
    await t.rejects(client.unregisterSystemSharedMemory(), { statusCode: 503, message: 'Service Unavailable' })
    await t.rejects(client.unregisterSystemSharedMemory('r'), { statusCode: 500, message: 'Internal Server Error' })
    await t.rejects(client.unregisterCudaSharedMemory(), { statusCode: 500, message: 'Internal Server Error' })
  })
})

t.test('SharedMemoryObject', async (t) => {
  t.test('create, open, close, destroy', async (t) => {
    const key = uniqueKey('object')
    unlinkOnTeardown(t, key)
    const object = SharedMemoryObject.create(key, 5000)
    t.equal(object.key, key)
    t.equal(object.byteSize, 5000)
    t.equal(object.bytes.length, 5000)
    t.equal(statSync(objectPath(key)).size, 5000, 'an object of that size in /dev/shm')
    t.equal(statSync(objectPath(key)).mode & 0o777, 0o600, 'readable and writable by this user only')
    t.ok(object.bytes.every((value) => value === 0), 'zero-filled')
    object.bytes.set([1, 2, 3], 4997)
    t.same([...readFileSync(objectPath(key)).subarray(4997)], [1, 2, 3], 'writes reach the object')

    const opened = SharedMemoryObject.open(key, 4000)
    t.equal(opened.bytes.length, 4000)
    opened.bytes[0] = 42
    t.equal(object.bytes[0], 42, 'two mappings of one object share its bytes')
    opened.close()
    t.equal(opened.bytes.length, 0, 'a closed mapping reads as empty')
    t.equal(object.bytes[0], 42, 'the other mapping is untouched')
    object.destroy()
    t.equal(object.bytes.length, 0)
    t.notOk(existsSync(objectPath(key)), 'destroy removed the object')
  })

  t.test('create fails on an existing object and leaves it alone', async (t) => {
    const key = makeObject(t, 64)
    t.throws(() => SharedMemoryObject.create(key, 128), { code: 'EEXIST' })
    t.equal(statSync(objectPath(key)).size, 64, 'the existing object is intact')
  })

  t.test('create removes the object again when it cannot be mapped', async (t) => {
    const key = uniqueKey('unmappable')
    unlinkOnTeardown(t, key)
    t.throws(() => SharedMemoryObject.create(key, 0), { code: 'ERR_SHM_OUT_OF_BOUNDS' })
    t.notOk(existsSync(objectPath(key)), 'no object left behind')
  })

  t.test('open of a missing object throws', async (t) => {
    t.throws(() => SharedMemoryObject.open(uniqueKey('missing'), 8), { code: 'ENOENT' })
  })
})

t.test('npm run example: starts the service, runs the client, exits 0 with PASS', async (t) => {
  // KEY_SUFFIX keeps its objects apart from any other run of the example (a developer's, another test run).
  const suffix = randomSuffix()
  removeLeftoversOnTeardown(t, suffix)
  // No coverage from it: tap would merge the numbers of its tsx-compiled code with this process's,
  // whose line maps differ, and report covered lines as uncovered.
  const child = spawn('npm', ['run', 'example'], {
    cwd: ROOT,
    env: { ...process.env, KEY_SUFFIX: suffix, LOG_LEVEL: 'info', _TAPJS_PROCESSINFO_COVERAGE_: '0' },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true
  })
  let output = ''
  child.stdout.on('data', (chunk: Buffer) => { output += chunk.toString() })
  child.stderr.on('data', (chunk: Buffer) => { output += chunk.toString() })
  const exited = once(child, 'exit')
  // Only a run that hangs is ended here: a slow machine just takes longer.
  t.teardown(() => killGroup(child.pid!))
  const [code] = await bounded(exited, 'npm run example did not exit') as [number | null]
  t.equal(code, 0, output)
  t.match(output, /PASS: every result checked correct/)
  t.match(output, new RegExp(`registered output_data${suffix} and input_data${suffix}`), 'the run used the unique names')
  t.match(output, new RegExp(`\\[server\\] registered system shared memory region \\(region=input_data${suffix}, key=/input_simple${suffix}, bytes=128\\)`),
    'the service logged its registry')
  t.match(output, /service stopped/)
  t.same(shmLeftovers(suffix), [], 'no object left in /dev/shm')
})

t.test('the service as Triton without --allow-client-shm (ALLOW_CLIENT_SHM=false), and its switches checked at start', async (t) => {
  const service = startServiceProcess(t, 256, { ALLOW_CLIENT_SHM: 'false' })
  const baseUrl = await service.baseUrl()
  const key = makeObject(t, 64, 'disabled')
  const register = await post(`${baseUrl}${SYSTEM}/region/r/register`, { key, byte_size: 64 })
  t.equal(register.status, 501)
  t.match((await register.json() as { error: string }).error, /^Client shared memory is disabled\./, 'Triton\'s words')
  t.equal((await post(`${baseUrl}${SYSTEM}/unregister`)).status, 501, 'unregister too, as Triton\'s test_client_shm_disabled_by_default checks')
  t.same(await getJson(`${baseUrl}${SYSTEM}/status`), { status: 200, type: 'application/json', body: [] }, 'status stays open')

  const misconfigurations: Array<[Record<string, string>, RegExp]> = [
    [{ CLIENT_SHM_ACCESS: 'everyone' }, /option 'clientShmAccess' must be equal to one of the allowed values/],
    [{ ALLOW_CLIENT_SHM: '0' }, /ALLOW_CLIENT_SHM must be true or false, not '0'/]
  ]
  for (const [env, says] of misconfigurations) {
    const misconfigured = startServiceProcess(t, 256, env)
    await bounded(misconfigured.exited, `a service with ${JSON.stringify(env)} did not exit`)
    t.equal(misconfigured.exit, 'code 1', `${JSON.stringify(env)}: it does not start`)
    t.match(misconfigured.other, says, 'and says which setting is wrong')
  }
})
