/**
 * fastify-triton-shm/onnxruntime over real ONNX Runtime sessions, real HTTP and real shared memory:
 * signatures from graphs, every datatype ORT takes, inputs read from the client's region and
 * outputs written into it by ORT itself, and ORT's refusals as 400s.
 */
import { InferenceSession } from 'onnxruntime-node'
import { onnx } from 'onnx-proto'
import t from 'tap'
import { readFileSync } from 'node:fs'
import path from 'node:path'
import { classify, testImage } from '../example/onnx/classifier-reference'
import { classifierGraph, GRAPHS, identityGraph, simpleGraph } from '../example/onnx/graphs'
import { datatypeOf, onnxSignature, ortTypeOf, runSession } from '../lib/onnxruntime'
import { onnxRuntime } from '../lib/onnxruntime/runtime'
import type { Datatype, ModelSignature } from '../types'
import { countCopies } from './helpers/copies'
import { assertError } from './helpers/http'
import { fixedSizeRoundTrips, simpleInPlace } from './helpers/onnx-cases'
import { identityOf } from './helpers/onnx-graphs'
import {
  binaryInput, buildInferApp, bytesOfValues, infer, inferBinary, jsonInput, makeMappedObject, parseInferResponse, registerRegion,
  serializeStrings, shmInput, shmOutput, type TestModel
} from './helpers/kserve'

// onnxruntime-node's own sessions, made here before any runner: without this, ORT's telemetry
// uploader would write under the user's ~/.cache and in TMPDIR (as the ONNX runner prevents for
// its own processes, see test/onnx-runner-files.test.ts).
process.env.ORT_DISABLE_TELEMETRY = '1'

// ORT logs a failed run at error level; the tests check what the client gets instead.
const session = (bytes: Uint8Array) => InferenceSession.create(Buffer.from(bytes), { logSeverityLevel: 4 })

/** A test model that runs `graph` through the adapter, with a hook after ORT ran and before the response is made. */
async function ortModel (graph: Uint8Array, name: string, afterRun?: () => void, signature?: ModelSignature): Promise<TestModel> {
  const ortSession = await session(graph)
  return {
    signature: signature ?? onnxSignature(ortSession, { name }),
    async execute (request) {
      await runSession(ortSession, request)
      afterRun?.()
    }
  }
}

const sixteen = (at: (index: number) => number) => Array.from({ length: 16 }, (_, index) => at(index))

t.test('signatures come from the graph: symbolic dims are -1, and options add or override', async (t) => {
  const simple = await session(simpleGraph())
  const tensor = (name: string) => ({ name, datatype: 'INT32', shape: [-1, 16] })
  t.same(onnxSignature(simple, { name: 'simple' }), {
    name: 'simple',
    platform: 'onnxruntime_onnx',
    inputs: [tensor('INPUT0'), tensor('INPUT1')],
    outputs: [tensor('OUTPUT0'), tensor('OUTPUT1')]
  })
  const custom = onnxSignature(simple, { name: 'custom', versions: ['3'], maxBatchSize: 8, shapes: { INPUT0: [-1, 16, 1] } })
  t.same([custom.versions, custom.maxBatchSize, custom.inputs[0].shape], [['3'], 8, [-1, 16, 1]])

  const sequence = { tensorType: undefined, sequenceType: { elemType: { tensorType: { elemType: 1, shape: { dim: [{ dimValue: 2 }] } } } } }
  const graph = { name: 'g', node: [{ opType: 'Identity', input: ['x'], output: ['y'] }], input: [{ name: 'x', type: sequence }], output: [{ name: 'y', type: sequence }] }
  const sequences = await session(onnx.ModelProto.encode(onnx.ModelProto.create({ irVersion: 8, opsetImport: [{ domain: '', version: 16 }], graph })).finish())
  t.throws(() => onnxSignature(sequences, { name: 'g' }), new TypeError("graph value 'x' is not a tensor: only tensors can be served"))
  // This build of ORT cannot load an int4 graph; its metadata would read so.
  const int4 = { inputMetadata: [{ name: 'x', isTensor: true, type: 'int4', shape: [2] }], outputMetadata: [] } as unknown as InferenceSession
  t.throws(() => onnxSignature(int4, { name: 'g' }), new TypeError("graph tensor 'x' has type int4, which KServe has no datatype for"))
})

t.test('the datatype table covers every KServe datatype ORT has, both ways', async (t) => {
  const datatypes: Datatype[] = ['BOOL', 'UINT8', 'UINT16', 'UINT32', 'UINT64', 'INT8', 'INT16', 'INT32', 'INT64', 'FP16', 'FP32', 'FP64', 'BYTES']
  for (const datatype of datatypes) t.equal(datatypeOf(ortTypeOf(datatype) as never), datatype, datatype)
  t.equal(ortTypeOf('BF16'), undefined, 'ORT for JavaScript has no bfloat16')
  t.equal(datatypeOf('int4'), undefined)
})

t.test('simple through ORT and shared memory: inputs read in place, outputs written by ORT itself', async (t) => {
  await simpleInPlace(t, ortModel, 'ort_simple')
})

t.test('simple through ORT with JSON and binary data, and an output the request did not ask for', async (t) => {
  const { app } = await buildInferApp(t, [await ortModel(simpleGraph(), 'simple')])
  const json = await infer(app, 'simple', {
    inputs: [jsonInput('INPUT0', 'INT32', [2, 16], [...sixteen((i) => i), ...sixteen((i) => 2 * i)]), jsonInput('INPUT1', 'INT32', [2, 16], new Array(32).fill(1))],
    outputs: [{ name: 'OUTPUT1' }]
  })
  t.same(JSON.parse(json.body), { model_name: 'simple', outputs: [{ name: 'OUTPUT1', datatype: 'INT32', shape: [2, 16], data: [...sixteen((i) => i - 1), ...sixteen((i) => 2 * i - 1)] }] })
  const binary = parseInferResponse(await inferBinary(app, 'simple', {
    inputs: [binaryInput('INPUT0', 'INT32', [1, 16], 64), binaryInput('INPUT1', 'INT32', [1, 16], 64)],
    parameters: { binary_data_output: true }
  }, [bytesOfValues('INT32', sixteen((i) => i)), bytesOfValues('INT32', sixteen(() => 10))]))
  t.same(binary.binary.get('OUTPUT0'), bytesOfValues('INT32', sixteen((i) => i + 10)))
})

t.test('every fixed-size datatype ORT takes, from binary data and shared memory', async (t) => {
  // At an odd offset FP16 (raw bytes) cannot be a 16-bit view, and is copied in and out.
  await fixedSizeRoundTrips(t, ortModel, 'ort')
})

t.test('BYTES through ORT strings, from shared memory, JSON and binary data', async (t) => {
  const { app } = await buildInferApp(t, [await ortModel(identityOf(onnx.TensorProto.DataType.STRING, ['n']), 'm')])
  const object = makeMappedObject(t, 4096, 'ort_strings')
  await registerRegion(t, app, 'r', object.key, 4096)
  const strings = serializeStrings(['héllo', '', 'wörld'])
  object.bytes.set(strings)
  const response = await infer(app, 'm', { inputs: [shmInput('x', 'BYTES', [3], 'r', strings.length)], outputs: [shmOutput('y', 'r', 512, 1024)] })
  t.equal(response.statusCode, 200, response.body)
  t.same(Buffer.from(object.bytes.subarray(1024, 1024 + strings.length)), strings)
  const json = await infer(app, 'm', { inputs: [jsonInput('x', 'BYTES', [2], ['a', 'b'])] })
  t.same(JSON.parse(json.body).outputs[0].data, ['a', 'b'])
})

t.test('an output whose shape the inputs do not give is allocated by ORT and copied once', async (t) => {
  const { app } = await buildInferApp(t, [await ortModel(identityOf(onnx.TensorProto.DataType.FLOAT, ['n'], ['m']), 'm')])
  const { result: response, copies } = await countCopies(() => infer(app, 'm', { inputs: [jsonInput('x', 'FP32', [2], [1.5, -2])] }))
  t.equal(response.statusCode, 200, response.body)
  t.equal(copies, 1, 'one copy, counted as the in-place runs count none')
  t.same(JSON.parse(response.body).outputs[0], { name: 'y', datatype: 'FP32', shape: [2], data: [1.5, -2] })
})

t.test('ORT\'s refusals are 400 with its message, and name none of its files', async (t) => {
  const { app } = await buildInferApp(t, [await ortModel(simpleGraph(), 'simple')])
  // Both inputs take the named dim 'batch': 2 and 1 disagree, which only ORT sees here.
  const response = await infer(app, 'simple', {
    inputs: [jsonInput('INPUT0', 'INT32', [2, 16], new Array(32).fill(1)), jsonInput('INPUT1', 'INT32', [3, 16], new Array(48).fill(1))]
  })
  const message = assertError(t, response, 400, /^ONNX Runtime refused the request: ./)
  t.notMatch(message, /\/[a-z_]+\//, 'no path')
})

t.test('a datatype ORT cannot take is a 400 before anything runs', async (t) => {
  const identity = await session(identityGraph())
  const signature: ModelSignature = { name: 'm', inputs: [{ name: 'INPUT0', datatype: 'BF16', shape: [-1] }], outputs: [{ name: 'OUTPUT0', datatype: 'FP32', shape: [-1] }] }
  const { app } = await buildInferApp(t, [{ signature, execute: (request) => runSession(identity, request) }])
  const response = await inferBinary(app, 'm', { inputs: [binaryInput('INPUT0', 'BF16', [2], 4)] }, [Buffer.alloc(4)])
  assertError(t, response, 400, "tensor 'INPUT0' has datatype BF16, which ONNX Runtime cannot take")
})

t.test('without onnxruntime-node, the adapter says which package to install', async (t) => {
  const missing = () => { throw Object.assign(new Error("Cannot find module 'onnxruntime-node'"), { code: 'MODULE_NOT_FOUND' }) }
  t.throws(() => onnxRuntime(missing), { message: "fastify-triton-shm/onnxruntime needs the package 'onnxruntime-node': npm install onnxruntime-node" })
  t.equal(onnxRuntime().InferenceSession, InferenceSession, 'loads the installed package')
})

t.test('the committed graphs are the ones example/onnx/graphs.ts builds', async (t) => {
  for (const [file, build] of Object.entries(GRAPHS)) {
    t.same(readFileSync(path.join(__dirname, '..', 'example', 'onnx', file)), Buffer.from(build()), `${file} (npm run onnx-models rewrites it)`)
  }
})

t.test('the tiny classifier through ORT and shared memory matches its JavaScript reference', async (t) => {
  const image = testImage()
  const imageBytes = Buffer.from(image.buffer)
  const object = makeMappedObject(t, imageBytes.length + 4096, 'ort_classifier')
  object.bytes.set(imageBytes)
  const { app } = await buildInferApp(t, [await ortModel(classifierGraph(), 'tiny_classifier')])
  await registerRegion(t, app, 'image', object.key, imageBytes.length + 4096)
  const response = await infer(app, 'tiny_classifier', {
    inputs: [shmInput('image', 'FP32', [1, 3, 224, 224], 'image', imageBytes.length)],
    outputs: [shmOutput('probabilities', 'image', 40, imageBytes.length)]
  })
  t.equal(response.statusCode, 200, response.body)
  const probabilities = Array.from(new Float32Array(object.bytes.buffer, object.bytes.byteOffset + imageBytes.length, 10))
  const expected = classify(image)
  const worst = Math.max(...probabilities.map((value, index) => Math.abs(value - expected[index])))
  t.ok(worst < 1e-5, `every probability within 1e-5 of the reference (worst ${worst})`)
  t.ok(Math.abs(probabilities.reduce((sum, value) => sum + value, 0) - 1) < 1e-5, 'they sum to 1')
})
