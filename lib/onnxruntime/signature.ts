/** The KServe model signature of an ONNX Runtime session, from its graph's inputs and outputs. */
import type { InferenceSession } from 'onnxruntime-node'
import type { ModelSignature, TensorSpec } from '../../types/kserve'
import * as errors from '../errors'
import { datatypeOf } from './datatypes'

export interface OnnxSignatureOptions {
  /** The model's name, as clients address it. */
  name: string
  versions?: string[]
  /** As Triton's `max_batch_size` (see `ModelSignature`). */
  maxBatchSize?: number
  /** Shapes to publish instead of the graph's, by tensor name: for a graph that leaves a shape out,
   * or whose dims should be narrower than it says. -1 is any size. */
  shapes?: Record<string, number[]>
}

function specOf (value: InferenceSession.ValueMetadata, shapes: Record<string, number[]>): TensorSpec {
  if (!value.isTensor) throw errors.notATensor(value.name)
  const datatype = datatypeOf(value.type)
  if (datatype === undefined) throw errors.noKServeDatatype(value.name, value.type)
  // Symbolic dimensions ('batch', 'N') take any size.
  const shape = shapes[value.name] ?? value.shape.map((dim) => typeof dim === 'number' ? dim : -1)
  return { name: value.name, datatype, shape }
}

/** The signature `readInferRequest` checks requests against, and the model metadata to publish, of
 * an onnxruntime-node session or of a model loaded into the runner (`OnnxRunner.load`). */
export function onnxSignature (session: Pick<InferenceSession, 'inputMetadata' | 'outputMetadata'>, options: OnnxSignatureOptions): ModelSignature {
  const { name, versions, maxBatchSize, shapes = {} } = options
  return {
    name,
    ...(versions === undefined ? {} : { versions }),
    platform: 'onnxruntime_onnx',
    ...(maxBatchSize === undefined ? {} : { maxBatchSize }),
    inputs: session.inputMetadata.map((value) => specOf(value, shapes)),
    outputs: session.outputMetadata.map((value) => specOf(value, shapes))
  }
}
