/** ONNX graphs for tests, built with onnx-proto as example/onnx/graphs.ts builds the example's. */
import { onnx } from 'onnx-proto'

type Dim = number | string

const { DataType } = onnx.TensorProto

function tensorInfo (name: string, elemType: number, dims: Dim[]): onnx.IValueInfoProto {
  return { name, type: { tensorType: { elemType, shape: { dim: dims.map((dim) => typeof dim === 'string' ? { dimParam: dim } : { dimValue: dim }) } } } }
}

function modelBytes (graph: onnx.IGraphProto): Uint8Array {
  return onnx.ModelProto.encode(onnx.ModelProto.create({ irVersion: 8, opsetImport: [{ domain: '', version: 13 }], graph })).finish()
}

/** A graph passing `x` to `y` unchanged, of one ONNX element type and shape. */
export function identityOf (elemType: number, inputDims: Dim[], outputDims = inputDims): Uint8Array {
  return modelBytes({
    name: 'identity',
    node: [{ opType: 'Identity', input: ['x'], output: ['y'] }],
    input: [tensorInfo('x', elemType, inputDims)],
    output: [tensorInfo('y', elemType, outputDims)]
  })
}

/** Columns of the slow graph's tensors. */
export const SLOW_COLUMNS = 256

/**
 * FP32 x [rows, 256] -> doubled = x + x, first; then slow = doubled times the identity matrix:
 * the same values, from a second node.
 */
export function slowGraph (): Uint8Array {
  const info = (name: string) => tensorInfo(name, DataType.FLOAT, ['rows', SLOW_COLUMNS])
  const eye = Array.from({ length: SLOW_COLUMNS * SLOW_COLUMNS }, (_, index) => index % (SLOW_COLUMNS + 1) === 0 ? 1 : 0)
  return modelBytes({
    name: 'slow',
    node: [
      { opType: 'Add', input: ['x', 'x'], output: ['doubled'] },
      { opType: 'MatMul', input: ['doubled', 'eye'], output: ['slow'] }
    ],
    initializer: [{ name: 'eye', dims: [SLOW_COLUMNS, SLOW_COLUMNS], dataType: DataType.FLOAT, floatData: eye }],
    input: [info('x')],
    output: [info('doubled'), info('slow')]
  })
}

/**
 * FP32 x [rows, 256] and INT32 stop [1] -> doubled = x + x, first; then slow, the same values, once
 * `stop` holds a value other than 0: a Loop reads it again and again until then. With `stop` in
 * shared memory, the test decides when the run ends: a run that provably goes on until then,
 * on any machine, however loaded.
 */
export function gatedGraph (): Uint8Array {
  const info = (name: string) => tensorInfo(name, DataType.FLOAT, ['rows', SLOW_COLUMNS])
  const scalar = (name: string, elemType: number): onnx.IValueInfoProto => ({ name, type: { tensorType: { elemType, shape: { dim: [] } } } })
  const body: onnx.IGraphProto = {
    name: 'until_stopped',
    node: [
      { opType: 'ReduceMax', input: ['stop'], output: ['stop_value'], attribute: [{ name: 'keepdims', i: 0, type: onnx.AttributeProto.AttributeType.INT }] },
      { opType: 'Equal', input: ['stop_value', 'zero'], output: ['going_on'] },
      { opType: 'Identity', input: ['carried'], output: ['carried_out'] }
    ],
    initializer: [{ name: 'zero', dims: [], dataType: DataType.INT32, int32Data: [0] }],
    input: [scalar('iteration', DataType.INT64), scalar('going', DataType.BOOL), { name: 'carried', type: { tensorType: { elemType: DataType.FLOAT } } }],
    output: [scalar('going_on', DataType.BOOL), { name: 'carried_out', type: { tensorType: { elemType: DataType.FLOAT } } }]
  }
  return modelBytes({
    name: 'gated',
    node: [
      { opType: 'Add', input: ['x', 'x'], output: ['doubled'] },
      // No trip count: the loop runs while its body says so. It carries doubled, so it starts after it.
      { opType: 'Loop', input: ['', 'start', 'doubled'], output: ['slow'], attribute: [{ name: 'body', g: body, type: onnx.AttributeProto.AttributeType.GRAPH }] }
    ],
    initializer: [{ name: 'start', dims: [], dataType: DataType.BOOL, int32Data: [1] }],
    input: [info('x'), tensorInfo('stop', DataType.INT32, [1])],
    output: [info('doubled'), info('slow')]
  })
}
