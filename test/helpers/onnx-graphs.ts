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
 * FP32 x [rows, 256] -> doubled = x + x, first; then slow = doubled times the identity matrix,
 * `stages` times over: the same values, after a wait that grows with rows and stages. ORT writes
 * `doubled` at the start of the run and `slow` at its end.
 */
export function slowGraph (stages: number): Uint8Array {
  const info = (name: string) => tensorInfo(name, DataType.FLOAT, ['rows', SLOW_COLUMNS])
  const node: onnx.INodeProto[] = [{ opType: 'Add', input: ['x', 'x'], output: ['doubled'] }]
  for (let stage = 0; stage < stages; stage++) {
    node.push({ opType: 'MatMul', input: [stage === 0 ? 'doubled' : `stage${stage - 1}`, 'eye'], output: [stage === stages - 1 ? 'slow' : `stage${stage}`] })
  }
  const eye = Array.from({ length: SLOW_COLUMNS * SLOW_COLUMNS }, (_, index) => index % (SLOW_COLUMNS + 1) === 0 ? 1 : 0)
  return modelBytes({
    name: 'slow',
    node,
    initializer: [{ name: 'eye', dims: [SLOW_COLUMNS, SLOW_COLUMNS], dataType: DataType.FLOAT, floatData: eye }],
    input: [info('x')],
    output: [info('doubled'), info('slow')]
  })
}
