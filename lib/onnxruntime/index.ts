/**
 * fastify-triton-shm/onnxruntime: serve ONNX models with ONNX Runtime (onnxruntime-node, an optional
 * peer dependency, used only here). `OnnxRunner` runs them in this package's addon, off the event
 * loop, with no tensor byte copied from the client's region to ORT or from ORT back into it.
 * `runSession` runs them on an onnxruntime-node session instead: on the main thread, each output
 * copied by onnxruntime-node.
 */
export { OnnxRunner, type OnnxRunnerOptions, type OnnxSessionOptions } from './onnx-runner'
export { OnnxModel } from './onnx-model'
export { onnxSignature, type OnnxSignatureOptions } from './signature'
export { runSession } from './run-session'
export { datatypeOf, ortTypeOf } from './datatypes'
