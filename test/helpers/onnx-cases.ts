/**
 * Checks both ways of running ONNX models take (onnxruntime-node sessions through `runSession`, and
 * the runner): `simple` in place through shared memory, and identity graphs of every fixed-size
 * datatype through shared memory and binary data.
 */
import { onnx } from 'onnx-proto'
import type { Test } from 'tap'
import { simpleGraph } from '../../example/onnx/graphs'
import type { Datatype } from '../../types'
import { countCopies } from './copies'
import {
  binaryInput, buildInferApp, bytesOfValues, infer, inferBinary, makeMappedObject, parseInferResponse, registerRegion, shmInput, shmOutput,
  type TestModel
} from './kserve'
import { identityOf } from './onnx-graphs'

/** A model named `name` running `graph`, the way a test file runs graphs. */
export type GraphModel = (graph: Uint8Array, name: string, afterRun?: () => void) => TestModel | Promise<TestModel>

const sixteen = (at: (index: number) => number) => Array.from({ length: 16 }, (_, index) => at(index))

/** simple, inputs and outputs in one region, twice: OUTPUT0 and OUTPUT1 are right, and nothing was copied in JavaScript. */
export async function simpleInPlace (t: Test, model: GraphModel, label: string): Promise<void> {
  const object = makeMappedObject(t, 4096, label)
  const int32 = (offset: number) => Array.from(new Int32Array(object.bytes.buffer, object.bytes.byteOffset + offset, 16))
  let writtenBeforeResponse: number[] = []
  const { app } = await buildInferApp(t, [await model(simpleGraph(), 'simple', () => { writtenBeforeResponse = int32(1024) })])
  await registerRegion(t, app, 'io', object.key, 4096)
  const request = {
    inputs: [shmInput('INPUT0', 'INT32', [1, 16], 'io', 64), shmInput('INPUT1', 'INT32', [1, 16], 'io', 64, 64)],
    outputs: [shmOutput('OUTPUT0', 'io', 64, 1024), shmOutput('OUTPUT1', 'io', 64, 2048)]
  }
  for (const round of [1, 2]) {
    object.bytes.set(bytesOfValues('INT32', [...sixteen((index) => index * round), ...sixteen(() => 3)]))
    const { result: response, copies } = await countCopies(() => infer(app, 'simple', request))
    t.equal(response.statusCode, 200, response.body)
    t.equal(copies, 0, `round ${round}: no tensor was copied, in or out`)
    t.same(int32(1024), sixteen((index) => index * round + 3), `round ${round}: OUTPUT0 = INPUT0 + INPUT1 as the client last wrote them`)
    t.same(int32(2048), sixteen((index) => index * round - 3), `round ${round}: OUTPUT1`)
    t.same(writtenBeforeResponse, int32(1024), `round ${round}: ORT wrote OUTPUT0 into the region before the response was made`)
  }
}

const { DataType } = onnx.TensorProto
const FIXED_SIZE_CASES: Array<[Exclude<Datatype, 'BYTES'>, number, Array<number | bigint | boolean>]> = [
  ['BOOL', DataType.BOOL, [true, false, true]],
  ['UINT8', DataType.UINT8, [0, 255, 7]],
  ['INT16', DataType.INT16, [-32768, 32767, 0]],
  ['UINT64', DataType.UINT64, [0n, 2n ** 64n - 1n, 5n]],
  ['INT64', DataType.INT64, [-(2n ** 63n), 2n ** 63n - 1n, 0n]],
  ['FP16', DataType.FLOAT16, [0x3c00, 0xc000, 0x7bff]],
  ['FP64', DataType.DOUBLE, [1.5, -0.25, 1e300]]
]

/** Identity graphs of every fixed-size datatype ORT takes, through shared memory (FP16 also at an
 * odd offset: raw bytes) and binary data: the bytes come back unchanged. */
export async function fixedSizeRoundTrips (t: Test, model: GraphModel, label: string): Promise<void> {
  for (const [datatype, elemType, values] of FIXED_SIZE_CASES) {
    const { app } = await buildInferApp(t, [await model(identityOf(elemType, ['n']), 'm')])
    const object = makeMappedObject(t, 4096, `${label}_${datatype}`)
    await registerRegion(t, app, 'r', object.key, 4096)
    const bytes = bytesOfValues(datatype, values)
    for (const at of datatype === 'FP16' ? [64, 101] : [64]) {
      object.bytes.set(bytes, at)
      const response = await infer(app, 'm', { inputs: [shmInput('x', datatype, [3], 'r', bytes.length, at)], outputs: [shmOutput('y', 'r', bytes.length, at + 1024)] })
      t.equal(response.statusCode, 200, `${datatype} at ${at}: ${response.body}`)
      t.same(Buffer.from(object.bytes.subarray(at + 1024, at + 1024 + bytes.length)), bytes, `${datatype} at ${at} through shared memory`)
    }
    const binary = parseInferResponse(await inferBinary(app, 'm', {
      inputs: [binaryInput('x', datatype, [3], bytes.length)], outputs: [{ name: 'y', parameters: { binary_data: true } }]
    }, [bytes]))
    t.same(binary.binary.get('y'), bytes, `${datatype} through binary data`)
  }
}
