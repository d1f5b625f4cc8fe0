/**
 * The ONNX runner (fastify-triton-shm/onnxruntime's OnnxRunner) over the real ONNX Runtime library
 * onnxruntime-node ships, real HTTP and real shared memory: ORT writes outputs once, into the
 * client's region, on a thread of its own while the event loop keeps answering; runs are bounded,
 * hold their leases until they end, are stopped when their client leaves, and are waited for at
 * close; a region truncated under ORT's threads is caught like any other access.
 */
import { truncateSync } from 'node:fs'
import http from 'node:http'
import path from 'node:path'
import { InferenceSession } from 'onnxruntime-node'
import { onnx } from 'onnx-proto'
import t, { type Test } from 'tap'
import { classifierGraph, identityGraph, simpleGraph } from '../example/onnx/graphs'
import { OnnxModel, OnnxRunner, onnxSignature, type OnnxSessionOptions } from '../lib/onnxruntime'
import { ortTypeOfElement } from '../lib/onnxruntime/datatypes'
import { bundledLibrary, checkServes, servesApi } from '../lib/onnxruntime/ort-library'
import type { ModelSignature } from '../types'
import { countCopies } from './helpers/copies'
import { assertError } from './helpers/http'
import {
  buildInferApp, bytesOfValues, infer, inferUrl, jsonInput, makeMappedObject, parseInferResponse,
  registerRegion, shmInput, shmOutput, type TestModel, unregisterIsImmediate
} from './helpers/kserve'
import { fixedSizeRoundTrips, simpleInPlace } from './helpers/onnx-cases'
import { gatedGraph, identityOf, SLOW_COLUMNS, slowGraph } from './helpers/onnx-graphs'
import { makeObject, objectPath, PAGE_SIZE, writeObjectFile } from './helpers/shm'
import { bounded } from './helpers/sync'

const { DataType } = onnx.TensorProto
const QUIET: OnnxSessionOptions = { logSeverityLevel: 4 } // ORT would log each refused run to stderr

function runner (t: Test, options?: ConstructorParameters<typeof OnnxRunner>[0]): OnnxRunner {
  const made = new OnnxRunner(options)
  t.teardown(() => made.close())
  return made
}

/** A test model that runs `graph` in the runner, with hooks before and after the run. */
async function runnerModel (onnxRunner: OnnxRunner, graph: Uint8Array, name: string,
  hooks: { before?: () => void, afterRun?: () => void } = {}): Promise<TestModel> {
  const model = await onnxRunner.load(graph, QUIET)
  return {
    signature: onnxSignature(model, { name }),
    async execute (request) {
      hooks.before?.()
      await model.run(request)
      hooks.afterRun?.()
    }
  }
}

const sixteen = (at: (index: number) => number) => Array.from({ length: 16 }, (_, index) => at(index))
const tick = () => new Promise((resolve) => setTimeout(resolve, 5))

t.test('the runner opens the library onnxruntime-node ships, at an API version that library serves', async (t) => {
  const onnxRunner = runner(t)
  t.equal(onnxRunner.runtimeVersion, undefined, 'nothing is loaded before the first model')
  const fromRunner = await onnxRunner.load(path.join(__dirname, '../example/onnx/simple.onnx'))
  const installed = (require('onnxruntime-node/package.json') as { version: string }).version
  t.equal(onnxRunner.runtimeVersion, installed, 'the library reports the installed onnxruntime-node\'s version')
  t.ok(fromRunner instanceof OnnxModel, 'a model of the runner')
  t.ok(servesApi(onnxRunner.runtimeVersion as string, 1), 'which serves the API version the runner asks for')
  t.equal(bundledLibrary(), path.join(path.dirname(require.resolve('onnxruntime-node/package.json')), 'bin/napi-v6/linux', process.arch, 'libonnxruntime.so.1'))
  t.same([servesApi('1.30.0', 30), servesApi('1.29.1', 30), servesApi('2.0.0', 30), servesApi('0.9.0', 1)], [true, false, true, false])
  t.throws(() => checkServes({ version: '1.16.3', apiVersion: 17 }, '/opt/ort/libonnxruntime.so.1'),
    { message: 'fastify-triton-shm/onnxruntime needs ONNX Runtime 1.17 or newer; /opt/ort/libonnxruntime.so.1 is 1.16.3' })

  // The same signatures as onnxruntime-node's sessions of the same graphs give.
  for (const [name, graph] of [['simple', simpleGraph()], ['identity', identityGraph()], ['classifier', classifierGraph()]] as const) {
    const session = await InferenceSession.create(Buffer.from(graph))
    t.same(onnxSignature(await onnxRunner.load(graph), { name }), onnxSignature(session, { name }), `${name}: the signature onnxruntime-node reads`)
  }
  t.same(onnxSignature(fromRunner, { name: 's' }).inputs[0], { name: 'INPUT0', datatype: 'INT32', shape: [-1, 16] }, 'from a file too')
})

t.test('without onnxruntime-node, the runner says which package to install', async (t) => {
  const missing = () => { throw Object.assign(new Error("Cannot find module 'onnxruntime-node'"), { code: 'MODULE_NOT_FOUND' }) }
  t.throws(() => bundledLibrary(missing), { message: "fastify-triton-shm/onnxruntime needs the package 'onnxruntime-node': npm install onnxruntime-node" })
})

t.test('simple through the runner and shared memory: inputs read in place, outputs written by ORT, no copy', async (t) => {
  const onnxRunner = runner(t)
  await simpleInPlace(t, (graph, name, afterRun) => runnerModel(onnxRunner, graph, name, { afterRun }), 'runner_simple')
  const { app } = await buildInferApp(t, [await runnerModel(onnxRunner, simpleGraph(), 'simple')])
  const json = await infer(app, 'simple', {
    inputs: [jsonInput('INPUT0', 'INT32', [2, 16], [...sixteen((i) => i), ...sixteen((i) => 2 * i)]), jsonInput('INPUT1', 'INT32', [2, 16], new Array(32).fill(1))],
    outputs: [{ name: 'OUTPUT1' }]
  })
  t.same(JSON.parse(json.body), { model_name: 'simple', outputs: [{ name: 'OUTPUT1', datatype: 'INT32', shape: [2, 16], data: [...sixteen((i) => i - 1), ...sixteen((i) => 2 * i - 1)] }] }, 'JSON in, one output asked for')
})

t.test('every fixed-size datatype through the runner, from binary data and shared memory', async (t) => {
  // FP16 is raw bytes: at an odd offset too, which ORT reads as it is.
  const onnxRunner = runner(t)
  await fixedSizeRoundTrips(t, (graph, name) => runnerModel(onnxRunner, graph, name), 'runner')
})

t.test('an output whose shape only ORT knows is ORT\'s memory, copied once into its storage', async (t) => {
  const { app } = await buildInferApp(t, [await runnerModel(runner(t), identityOf(DataType.FLOAT, ['n'], ['m']), 'm')])
  const { result: response, copies } = await countCopies(() => infer(app, 'm', { inputs: [jsonInput('x', 'FP32', [2], [1.5, -2])] }))
  t.equal(response.statusCode, 200, response.body)
  t.equal(copies, 1, 'one copy')
  t.same(JSON.parse(response.body).outputs[0], { name: 'y', datatype: 'FP32', shape: [2], data: [1.5, -2] })
  const empty = await infer(app, 'm', { inputs: [jsonInput('x', 'FP32', [0], [])] })
  t.same(JSON.parse(empty.body).outputs[0], { name: 'y', datatype: 'FP32', shape: [0], data: [] }, 'an empty output')

  const object = makeMappedObject(t, 4096, 'runner_unknown_shape')
  await registerRegion(t, app, 'r', object.key, 4096)
  object.bytes.set(bytesOfValues('FP32', [4, 5, 6]))
  const shm = await countCopies(() => infer(app, 'm', { inputs: [shmInput('x', 'FP32', [3], 'r', 12)], outputs: [shmOutput('y', 'r', 12, 2048)] }))
  t.equal(shm.result.statusCode, 200, shm.result.body)
  t.equal(shm.copies, 1, 'one copy, into the region')
  t.same(Array.from(new Float32Array(object.bytes.buffer, object.bytes.byteOffset + 2048, 3)), [4, 5, 6])
})

/** A slow graph's request with everything in one region: x, then doubled, then slow (then
 * `extraBytes` for the caller). */
async function slowRequest (t: Test, app: Awaited<ReturnType<typeof buildInferApp>>['app'], rows: number, label: string, extraBytes = 0) {
  const tensorBytes = rows * SLOW_COLUMNS * 4
  const object = makeMappedObject(t, 3 * tensorBytes + extraBytes, label)
  await registerRegion(t, app, label, object.key, 3 * tensorBytes + extraBytes)
  const floats = (index: number) => new Float32Array(object.bytes.buffer, object.bytes.byteOffset + index * tensorBytes, rows * SLOW_COLUMNS)
  floats(0).set(Float32Array.from({ length: rows * SLOW_COLUMNS }, (_, index) => index % 101))
  const body = {
    inputs: [shmInput('x', 'FP32', [rows, SLOW_COLUMNS], label, tensorBytes)],
    outputs: [shmOutput('doubled', label, tensorBytes, tensorBytes), shmOutput('slow', label, tensorBytes, 2 * tensorBytes)]
  }
  /** Whether ORT wrote `doubled` (its last element is 2 x's). */
  const doubledWritten = () => floats(1)[rows * SLOW_COLUMNS - 1] === 2 * ((rows * SLOW_COLUMNS - 1) % 101)
  return { body, floats, doubledWritten, region: label, bytes: object.bytes }
}

/** `check()` holding: looked at on each turn of the event loop's timers until it does. */
async function until (check: () => boolean, what: string): Promise<void> {
  await bounded((async () => { while (!check()) await tick() })(), what)
}

/**
 * A request of the gated graph with everything in one region: x, then doubled, then slow, then
 * stop; the run goes on until `stop()` writes into the region.
 */
async function gatedRequest (t: Test, app: Awaited<ReturnType<typeof buildInferApp>>['app'], rows: number, label: string) {
  const stopAt = 3 * rows * SLOW_COLUMNS * 4
  const request = await slowRequest(t, app, rows, label, 4)
  request.body.inputs.push(shmInput('stop', 'INT32', [1], label, 4, stopAt))
  const stop = () => { new Int32Array(request.bytes.buffer, request.bytes.byteOffset + stopAt, 1)[0] = 1 }
  return { ...request, stop }
}

t.test('ORT writes an output once, into the region, while the run goes on; the event loop keeps turning', async (t) => {
  const { app } = await buildInferApp(t, [await runnerModel(runner(t), gatedGraph(), 'gated')])
  const rows = 64
  const { body, floats, doubledWritten, stop } = await gatedRequest(t, app, rows, 'runner_gated')
  const slowUnwritten = () => floats(2).every((value) => value === 0)
  const { result, copies } = await countCopies(async () => {
    let responded = false
    const response = infer(app, 'gated', body).finally(() => { responded = true })
    // Each event is recorded with whether the run was still going on: it cannot end before stop().
    const events: Array<[string, boolean]> = []
    await until(doubledWritten, 'ORT to write doubled into the region')
    events.push(['doubled in the region, slow not yet', !responded && slowUnwritten()])
    const status = await app.inject({ method: 'GET', url: '/v2/systemsharedmemory/status' })
    events.push([`status answered ${status.statusCode}`, !responded])
    for (let ticks = 0; ticks < 20; ticks++) await tick()
    events.push(['a 5 ms timer fired 20 times', !responded])
    stop()
    const answered = await response
    events.push([`answered ${answered.statusCode}`, responded])
    return { events, answered }
  })
  t.same(result.events, [
    ['doubled in the region, slow not yet', true],
    ['status answered 200', true],
    ['a 5 ms timer fired 20 times', true],
    ['answered 200', true]
  ], 'doubled was in the region while ORT still ran (written there by ORT, not copied after the run), and the event loop answered meanwhile')
  t.equal(result.answered.statusCode, 200, result.answered.body)
  t.equal(copies, 0, 'no byte was copied in JavaScript either')
  const x = floats(0)
  t.ok(floats(1).every((value, index) => value === 2 * x[index]), 'doubled holds 2x')
  t.ok(floats(2).every((value, index) => value === 2 * x[index]), 'slow holds 2x too, written at the end')
})

t.test('a hold taken with retain() keeps the request\'s leases past its reply, until it ends (once)', async (t) => {
  let letGo = () => {}
  const model: TestModel = {
    signature: { name: 'm', inputs: [{ name: 'x', datatype: 'UINT8', shape: [-1] }], outputs: [] },
    execute (request) { letGo = request.retain() }
  }
  const { app } = await buildInferApp(t, [model])
  const object = makeMappedObject(t, 4096, 'runner_retain')
  await registerRegion(t, app, 'r', object.key, 4096)
  t.equal((await infer(app, 'm', { inputs: [shmInput('x', 'UINT8', [4], 'r', 4)] })).statusCode, 200)
  t.equal(app.systemSharedMemory.counters().liveLeases, 1, 'the reply is done; the hold keeps its lease')
  letGo()
  t.equal(app.systemSharedMemory.counters().liveLeases, 0, 'its end releases it')
  letGo()
  t.equal(app.systemSharedMemory.counters().liveLeases, 0, 'a second call does nothing')
})

t.test('graph values that are not tensors are described as such, and cannot be served', async (t) => {
  const sequence = { sequenceType: { elemType: { tensorType: { elemType: DataType.FLOAT, shape: { dim: [{ dimValue: 2 }] } } } } }
  const graph = { name: 'g', node: [{ opType: 'Identity', input: ['x'], output: ['y'] }], input: [{ name: 'x', type: sequence }], output: [{ name: 'y', type: sequence }] }
  const model = await runner(t).load(onnx.ModelProto.encode(onnx.ModelProto.create({ irVersion: 8, opsetImport: [{ domain: '', version: 16 }], graph })).finish())
  t.same(model.inputMetadata, [{ name: 'x', isTensor: false }])
  t.throws(() => onnxSignature(model, { name: 'g' }), new TypeError("graph value 'x' is not a tensor: only tensors can be served"))
  t.same([ortTypeOfElement(DataType.BFLOAT16), ortTypeOfElement(22)], ['bfloat16', 'element type 22'], 'element types ORT for JavaScript has no name for')
})

t.test('runs at once are bounded by the runner\'s concurrency; more wait their turn', async (t) => {
  for (const concurrency of [1, 2]) {
    const onnxRunner = runner(t, { concurrency })
    const { app } = await buildInferApp(t, [await runnerModel(onnxRunner, gatedGraph(), 'gated')])
    const first = await gatedRequest(t, app, 64, `runner_first_${concurrency}`)
    const second = await gatedRequest(t, app, 64, `runner_second_${concurrency}`)
    const firstResponse = infer(app, 'gated', first.body)
    await until(first.doubledWritten, 'the first run to start')
    const secondResponse = infer(app, 'gated', second.body)
    await until(() => onnxRunner.inFlight === 2, 'the second request to reach the runner')
    if (concurrency === 2) {
      await until(second.doubledWritten, 'the second run to start beside the first')
      t.pass('concurrency 2: the second run ran beside the first')
    } else {
      // The first run goes on until stop(): for as long as it does, the second may not start.
      for (let ticks = 0; ticks < 20; ticks++) await tick()
      t.notOk(second.doubledWritten(), 'concurrency 1: the second run waits while the first goes on')
    }
    first.stop()
    await until(second.doubledWritten, 'the second run to start')
    second.stop()
    t.same([(await firstResponse).statusCode, (await secondResponse).statusCode], [200, 200])
    t.equal(onnxRunner.inFlight, 0)
  }
})

t.test('a run whose client leaves while it waits for its turn leaves the queue at once, and lets go of its leases', async (t) => {
  const onnxRunner = runner(t, { concurrency: 1 })
  const { app, seen } = await buildInferApp(t, [await runnerModel(onnxRunner, gatedGraph(), 'gated')])
  const first = await gatedRequest(t, app, 64, 'runner_turn_first')
  const second = await gatedRequest(t, app, 64, 'runner_turn_second')
  await app.listen({ port: 0, host: '127.0.0.1' })
  const { port } = app.server.address() as { port: number }

  let firstResponded = false
  const firstResponse = infer(app, 'gated', first.body).finally(() => { firstResponded = true })
  await until(first.doubledWritten, 'the first run to start')
  const waiting = http.request({ port, host: '127.0.0.1', method: 'POST', path: inferUrl('gated'), headers: { 'content-type': 'application/json' } })
  waiting.on('error', () => {})
  waiting.end(JSON.stringify(second.body))
  await until(() => onnxRunner.inFlight === 2, 'the second run to wait for its turn')
  t.equal(app.systemSharedMemory.counters().liveLeases, 8, 'each request holds its four leases')

  waiting.destroy()
  await until(() => seen[1]?.signal.aborted === true, 'the server to see the client leave')
  // What its leaving lets go of is let go of before the event loop turns again: not at its turn.
  await new Promise((resolve) => setImmediate(resolve))
  const running = !firstResponded && first.floats(2).every((value) => value === 0)
  t.ok(running, 'the first run is still going on')
  t.equal(onnxRunner.inFlight, 1, 'the abandoned run left the queue')
  t.equal(app.systemSharedMemory.counters().liveLeases, 4, 'its leases are released: only the first run\'s remain')
  t.ok(unregisterIsImmediate(app, 'runner_turn_second'), 'nothing holds its region')
  t.ok(second.floats(1).every((value) => value === 0), 'it never ran')

  first.stop()
  t.equal((await firstResponse).statusCode, 200, 'the first run ends as it would have')
  t.equal(onnxRunner.inFlight, 0)
  // The turn went back to the runner: a new run takes it.
  const third = await gatedRequest(t, app, 64, 'runner_turn_third')
  third.stop()
  t.equal((await infer(app, 'gated', third.body)).statusCode, 200, 'and a run after them has its turn')
})

t.test('ORT\'s refusals and what the runner cannot take are 400s; bad options and models are refused at load', async (t) => {
  const onnxRunner = runner(t)
  const { app } = await buildInferApp(t, [await runnerModel(onnxRunner, simpleGraph(), 'simple')])
  // Both inputs take the named dim 'batch': 2 and 3 disagree, which only ORT sees here.
  const response = await infer(app, 'simple', {
    inputs: [jsonInput('INPUT0', 'INT32', [2, 16], new Array(32).fill(1)), jsonInput('INPUT1', 'INT32', [3, 16], new Array(48).fill(1))]
  })
  const message = assertError(t, response, 400, /^ONNX Runtime refused the request: ./)
  t.notMatch(message, /\/[a-z_]+\//, 'no path')

  const strings = await runnerModel(onnxRunner, identityOf(DataType.STRING, ['n']), 'strings')
  const toStrings = await onnxRunner.load(onnx.ModelProto.encode(onnx.ModelProto.create({
    irVersion: 8,
    opsetImport: [{ domain: '', version: 13 }],
    graph: {
      name: 'cast',
      node: [{ opType: 'Cast', input: ['x'], output: ['y'], attribute: [{ name: 'to', i: DataType.STRING, type: onnx.AttributeProto.AttributeType.INT }] }],
      input: [{ name: 'x', type: { tensorType: { elemType: DataType.FLOAT, shape: { dim: [{ dimParam: 'n' }] } } } }],
      output: [{ name: 'y', type: { tensorType: { elemType: DataType.STRING, shape: { dim: [{ dimParam: 'n' }] } } } }]
    }
  })).finish(), QUIET)
  const cast: TestModel = { signature: onnxSignature(toStrings, { name: 'cast' }), execute: (request) => toStrings.run(request) }
  const { app: stringsApp } = await buildInferApp(t, [strings, cast])
  assertError(t, await infer(stringsApp, 'strings', { inputs: [jsonInput('x', 'BYTES', [1], ['a'])] }), 400,
    "tensor 'x' has datatype BYTES, which ONNX Runtime cannot take")
  assertError(t, await infer(stringsApp, 'cast', { inputs: [jsonInput('x', 'FP32', [1], [1])] }), 400,
    "tensor 'y' has datatype BYTES, which ONNX Runtime cannot take")

  // A host's own signature that disagrees with the graph: refused, never reinterpreted.
  const identity = await onnxRunner.load(identityGraph(), QUIET)
  const disagreeing = (inputs: ModelSignature['inputs'], outputs: ModelSignature['outputs']): TestModel =>
    ({ signature: { name: 'm', inputs, outputs }, execute: (request) => identity.run(request) })
  const { app: customApp } = await buildInferApp(t, [disagreeing([{ name: 'INPUT0', datatype: 'INT32', shape: [-1] }], [{ name: 'OUTPUT0', datatype: 'FP32', shape: [-1] }])])
  assertError(t, await infer(customApp, 'm', { inputs: [jsonInput('INPUT0', 'INT32', [2], [1, 2])] }), 400,
    "ONNX Runtime refused the request: tensor 'INPUT0' has datatype INT32, the graph's has FP32")
  const { app: extraApp } = await buildInferApp(t, [disagreeing([{ name: 'INPUT0', datatype: 'FP32', shape: [-1] }], [{ name: 'EXTRA', datatype: 'FP32', shape: [-1] }])])
  assertError(t, await infer(extraApp, 'm', { inputs: [jsonInput('INPUT0', 'FP32', [2], [1, 2])] }), 400,
    "ONNX Runtime refused the request: tensor 'EXTRA' has datatype FP32, the graph's has none")

  const invalidOption = (message: string) => ({ name: 'TypeError', code: 'ERR_SHM_INVALID_OPTION', message: `fastify-triton-shm/onnxruntime: ${message}` })
  t.throws(() => new OnnxRunner({ concurrency: 0 }), invalidOption("option 'concurrency' must be >= 1"))
  t.throws(() => new OnnxRunner({ concurrency: 2, threads: 2 } as object), invalidOption("unknown option 'threads'"))
  await t.rejects(onnxRunner.load(simpleGraph(), { intraOpThreads: 1.5 }), invalidOption("option 'intraOpThreads' must be integer"))
  await t.rejects(onnxRunner.load(simpleGraph(), { graphOptimizationLevel: 'most' as 'all' }),
    invalidOption("option 'graphOptimizationLevel' must be equal to one of the allowed values"))
  await t.rejects(onnxRunner.load(simpleGraph(), { logSeverityLevel: 5 as 4 }), invalidOption("option 'logSeverityLevel' must be <= 4"))
  for (const level of ['disabled', 'basic', 'extended'] as const) {
    t.same((await onnxRunner.load(simpleGraph(), { graphOptimizationLevel: level, intraOpThreads: 2, interOpThreads: 1 })).inputMetadata.length, 2, `optimization ${level}`)
  }
  await t.rejects(onnxRunner.load(Buffer.from('not a model'), QUIET), { code: 'ERR_ORT' }, 'bytes that are no model: ORT says why')
  await t.rejects(onnxRunner.load('/nonexistent/model.onnx', QUIET), { code: 'ERR_ORT' }, 'a file that does not exist')
  await t.rejects(new OnnxRunner({ library: '/nonexistent/libonnxruntime.so.1' }).load(simpleGraph()),
    { message: /^fastify-triton-shm\/onnxruntime could not load ONNX Runtime from \/nonexistent\/libonnxruntime.so.1: / })
  await t.rejects(new OnnxRunner({ library: 'libm.so.6' }).load(simpleGraph()),
    { message: 'fastify-triton-shm/onnxruntime could not load ONNX Runtime from libm.so.6: the library is not ONNX Runtime, or too old' })
})

t.test('close waits for the runs in flight, then refuses new ones (503) and new models', async (t) => {
  const onnxRunner = new OnnxRunner()
  const { app } = await buildInferApp(t, [await runnerModel(onnxRunner, gatedGraph(), 'gated')])
  const { body, floats, doubledWritten, stop } = await gatedRequest(t, app, 64, 'runner_close')
  const response = infer(app, 'gated', body)
  await until(doubledWritten, 'the run to start')
  t.equal(onnxRunner.inFlight, 1)
  let closed = false
  const closing = onnxRunner.close().then(() => { closed = true })
  // The run goes on until stop(): for as long as it does, close may not end.
  for (let ticks = 0; ticks < 20; ticks++) await tick()
  t.notOk(closed, 'close is still waiting')
  stop()
  await bounded(closing, 'close to end once its run did')
  t.equal(onnxRunner.inFlight, 0, 'the run in flight ended first')
  t.ok(floats(2).every((value, index) => value === 2 * floats(0)[index]), 'having written its last output')
  t.equal((await response).statusCode, 200, 'and was answered in full')
  assertError(t, await infer(app, 'gated', body), 503, 'the ONNX runner is closed: the server is shutting down')
  await t.rejects(onnxRunner.load(simpleGraph()), { message: 'the ONNX runner is closed' })

  // A model still loading when its runner closes is ended, and refused.
  const late = new OnnxRunner()
  await late.load(identityGraph())
  const loading = late.load(classifierGraph())
  await late.close()
  await t.rejects(loading, { message: 'the ONNX runner is closed' }, 'a model that finished loading after close')
})

t.test('a client that leaves mid-run: its leases outlive the reply until ORT is done, and its run is stopped', async (t) => {
  const onnxRunner = runner(t)
  let leasesAfterClose = -1
  const { app, seen } = await buildInferApp(t, [await runnerModel(onnxRunner, gatedGraph(), 'gated')])
  const { body, floats, doubledWritten, region, stop } = await gatedRequest(t, app, 64, 'runner_leaves')
  await app.listen({ port: 0, host: '127.0.0.1' })
  const { port } = app.server.address() as { port: number }

  const request = http.request({ port, host: '127.0.0.1', method: 'POST', path: inferUrl('gated'), headers: { 'content-type': 'application/json' } })
  request.on('error', () => {})
  request.end(JSON.stringify(body))
  await until(doubledWritten, 'the run to start')
  // The reply's close ends the request's own hold on its leases; the run's hold keeps them.
  seen[0].signal.addEventListener('abort', () => queueMicrotask(() => { leasesAfterClose = app.systemSharedMemory.counters().liveLeases }))
  request.destroy()
  try {
    // Only stop() or the run being stopped ends it: it ending here is the stop.
    await until(() => app.systemSharedMemory.counters().liveLeases === 0, 'the run to be stopped')
  } finally {
    stop()
  }
  t.equal(leasesAfterClose, 4, 'after the reply closed, the run still held its four leases')
  t.ok(floats(2).every((value) => value === 0), 'it was stopped before its last output was written')
  t.ok(unregisterIsImmediate(app, region), 'once it ended, nothing held the region')
  t.equal(onnxRunner.inFlight, 0)
})

t.test('a region truncated under ORT\'s threads is caught by the fault guard: zeros are read, and the region is refused after', async (t) => {
  const rows = (16 * PAGE_SIZE) / (SLOW_COLUMNS * 4)
  const tensorBytes = rows * SLOW_COLUMNS * 4
  const key = makeObject(t, tensorBytes, 'runner_truncated')
  const x = Float32Array.from({ length: rows * SLOW_COLUMNS }, (_, index) => 1 + (index % 7))
  writeObjectFile(key, 0, new Uint8Array(x.buffer))
  let truncate = true
  const { app } = await buildInferApp(t, [await runnerModel(runner(t), slowGraph(), 'slow', {
    // After the request leased the region, before ORT reads it: the owner shrinks it to one page.
    before: () => { if (truncate) truncateSync(objectPath(key), PAGE_SIZE) }
  })])
  await registerRegion(t, app, 'x', key, tensorBytes)
  const request = { inputs: [shmInput('x', 'FP32', [rows, SLOW_COLUMNS], 'x', tensorBytes)], outputs: [{ name: 'doubled', parameters: { binary_data: true } }] }
  const response = parseInferResponse(await infer(app, 'slow', request))
  const doubled = new Float32Array(new Uint8Array(response.binary.get('doubled') as Buffer).buffer)
  const perPage = PAGE_SIZE / 4
  t.ok(doubled.subarray(0, perPage).every((value, index) => value === 2 * x[index]), 'the page still in the object was read')
  t.ok(doubled.subarray(perPage).every((value) => value === 0), 'pages past its end read as zeros: ORT\'s thread survived SIGBUS')
  truncate = false
  assertError(t, await infer(app, 'slow', request), 400, /^shared memory region 'x' is no longer usable: its object was truncated/)
})
