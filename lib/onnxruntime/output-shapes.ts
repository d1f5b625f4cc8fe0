/** The shapes of a graph's outputs that follow from its inputs': what ORT can write in place. */
import type { InferenceSession } from 'onnxruntime-node'
import type { InferRequest } from '../kserve/infer-request'

type TensorMetadata = InferenceSession.TensorValueMetadata

/** The size of each named (symbolic) dimension, as the inputs give it. */
export function namedDims (inputs: readonly InferenceSession.ValueMetadata[], infer: InferRequest): Map<string, number> {
  const sizes = new Map<string, number>()
  for (const value of inputs as TensorMetadata[]) {
    const { shape } = infer.input(value.name)
    value.shape.forEach((dim, index) => { if (typeof dim === 'string') sizes.set(dim, shape[index]) })
  }
  return sizes
}

/** An output's shape, where the graph fixes it or the inputs' named dims do; undefined otherwise. */
export function shapeOf (value: TensorMetadata, sizes: Map<string, number>): number[] | undefined {
  const shape = value.shape.map((dim) => typeof dim === 'number' ? dim : sizes.get(dim))
  return value.shape.length > 0 && shape.every((dim) => dim !== undefined && dim >= 0) ? shape as number[] : undefined
}
