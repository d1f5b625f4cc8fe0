/**
 * fastify-triton-shm/onnxruntime: serve ONNX models with onnxruntime-node (an optional peer
 * dependency, loaded only here), with no tensor byte copied in Node, from the client's region to
 * ORT and from ORT back into it.
 */
export { onnxSignature, type OnnxSignatureOptions } from './signature'
export { runSession } from './run-session'
export { datatypeOf, ortTypeOf } from './datatypes'
