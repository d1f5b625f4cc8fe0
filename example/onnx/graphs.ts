/**
 * The example's ONNX graphs, built in code so that they are reviewable and reproducible:
 * `npm run onnx-models` writes them to example/onnx/*.onnx (committed; the tests check that they
 * match this file).
 *
 *   simple          INT32 INPUT0, INPUT1 [batch, 16] -> OUTPUT0 = sum, OUTPUT1 = difference (Triton's)
 *   identity_fp32   FP32 INPUT0 [batch, n] -> OUTPUT0, the same values: the transport, and nothing else
 *   tiny_classifier FP32 image [1, 3, 224, 224] -> Conv 3x3 (8 filters, stride 2) -> Relu ->
 *                   global average -> Gemm (10 classes) -> Softmax: FP32 probabilities [1, 10]
 */
import { onnx } from 'onnx-proto'

const { DataType } = onnx.TensorProto
const OPSET = 13

type Dim = number | string

function tensorInfo (name: string, elemType: number, dims: Dim[]): onnx.IValueInfoProto {
  const dim = dims.map((value) => typeof value === 'string' ? { dimParam: value } : { dimValue: value })
  return { name, type: { tensorType: { elemType, shape: { dim } } } }
}

function modelBytes (graph: onnx.IGraphProto): Uint8Array {
  const model = onnx.ModelProto.create({ irVersion: 8, opsetImport: [{ domain: '', version: OPSET }], producerName: 'fastify-triton-shm', graph })
  return onnx.ModelProto.encode(model).finish()
}

export function simpleGraph (): Uint8Array {
  const io = (prefix: string) => [0, 1].map((index) => tensorInfo(`${prefix}${index}`, DataType.INT32, ['batch', 16]))
  return modelBytes({
    name: 'simple',
    node: [
      { opType: 'Add', input: ['INPUT0', 'INPUT1'], output: ['OUTPUT0'] },
      { opType: 'Sub', input: ['INPUT0', 'INPUT1'], output: ['OUTPUT1'] }
    ],
    input: io('INPUT'),
    output: io('OUTPUT')
  })
}

export function identityGraph (): Uint8Array {
  return modelBytes({
    name: 'identity_fp32',
    node: [{ opType: 'Identity', input: ['INPUT0'], output: ['OUTPUT0'] }],
    input: [tensorInfo('INPUT0', DataType.FLOAT, ['batch', 'n'])],
    output: [tensorInfo('OUTPUT0', DataType.FLOAT, ['batch', 'n'])]
  })
}

/** The classifier's size: an ImageNet-shaped input, a handful of filters and classes. */
export const CLASSIFIER = { channels: 3, size: 224, filters: 8, kernel: 3, stride: 2, padding: 1, classes: 10 } as const

/** Deterministic weights in [-0.5, 0.5): a fixed sequence (no randomness), the same everywhere. */
export function weights (count: number, seed: number): Float32Array {
  return Float32Array.from({ length: count }, (_, index) => ((Math.sin((index + 1) * 12.9898 + seed * 78.233) * 43758.5453) % 1) / 2)
}

/** The classifier's parameters, by initializer name. */
export function classifierWeights () {
  const { channels, filters, kernel, classes } = CLASSIFIER
  return {
    convWeight: weights(filters * channels * kernel * kernel, 1),
    convBias: weights(filters, 2),
    gemmWeight: weights(classes * filters, 3),
    gemmBias: weights(classes, 4)
  }
}

export function classifierGraph (): Uint8Array {
  const { channels, size, filters, kernel, stride, padding, classes } = CLASSIFIER
  const { convWeight, convBias, gemmWeight, gemmBias } = classifierWeights()
  const initializer = (name: string, dims: number[], values: Float32Array): onnx.ITensorProto =>
    ({ name, dims, dataType: DataType.FLOAT, floatData: Array.from(values) })
  const ints = (name: string, values: number[]): onnx.IAttributeProto => ({ name, ints: values, type: onnx.AttributeProto.AttributeType.INTS })
  return modelBytes({
    name: 'tiny_classifier',
    node: [
      {
        opType: 'Conv',
        input: ['image', 'conv_weight', 'conv_bias'],
        output: ['features'],
        attribute: [ints('strides', [stride, stride]), ints('pads', [padding, padding, padding, padding]), ints('kernel_shape', [kernel, kernel])]
      },
      { opType: 'Relu', input: ['features'], output: ['activated'] },
      { opType: 'GlobalAveragePool', input: ['activated'], output: ['pooled'] },
      { opType: 'Flatten', input: ['pooled'], output: ['flat'] },
      { opType: 'Gemm', input: ['flat', 'gemm_weight', 'gemm_bias'], output: ['logits'], attribute: [{ name: 'transB', i: 1, type: onnx.AttributeProto.AttributeType.INT }] },
      { opType: 'Softmax', input: ['logits'], output: ['probabilities'], attribute: [{ name: 'axis', i: 1, type: onnx.AttributeProto.AttributeType.INT }] }
    ],
    initializer: [
      initializer('conv_weight', [filters, channels, kernel, kernel], convWeight),
      initializer('conv_bias', [filters], convBias),
      initializer('gemm_weight', [classes, filters], gemmWeight),
      initializer('gemm_bias', [classes], gemmBias)
    ],
    input: [tensorInfo('image', DataType.FLOAT, [1, channels, size, size])],
    output: [tensorInfo('probabilities', DataType.FLOAT, [1, classes])]
  })
}

/** Every graph, by the file name it is written to. */
export const GRAPHS: Record<string, () => Uint8Array> = {
  'simple.onnx': simpleGraph,
  'identity_fp32.onnx': identityGraph,
  'tiny_classifier.onnx': classifierGraph
}
