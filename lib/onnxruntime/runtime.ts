/**
 * onnxruntime-node, loaded when first needed: it is an optional peer dependency, and nothing else
 * of this package loads it.
 */
import type * as Ort from 'onnxruntime-node'

const PACKAGE = 'onnxruntime-node'

/** The runtime's module (Node caches it after the first load); throws, naming the package, where
 * it is not installed. `load` is `require`, or a stand-in for it. */
export function onnxRuntime (load: (name: string) => unknown = require): typeof Ort {
  try {
    return load(PACKAGE) as typeof Ort
  } catch (error) {
    throw new Error(`fastify-triton-shm/onnxruntime needs the package '${PACKAGE}': npm install ${PACKAGE}`, { cause: error })
  }
}
