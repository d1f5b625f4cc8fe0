/**
 * onnxruntime-node, loaded when first needed: it is an optional peer dependency, and nothing else
 * of this package loads it.
 */
import type * as Ort from 'onnxruntime-node'
import { optionalPeer } from '../util/optional-peer'

/** The runtime's module; throws, naming the package, where it is not installed. `load` is
 * `require`, or a stand-in for it. */
export function onnxRuntime (load?: (name: string) => unknown): typeof Ort {
  return optionalPeer<typeof Ort>('onnxruntime-node', 'fastify-triton-shm/onnxruntime', load)
}
