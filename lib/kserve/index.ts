/** KServe V2 inference helpers: tensors from JSON, binary data or shared memory, and back. */
export { readInferRequest, InferRequest, type ReadInferRequestOptions } from './infer-request'
export { inferBodyParser, parseInferBody, useInferBodyParser, InferBody, HEADER_LENGTH_HEADER } from './infer-body'
export { DATATYPES, elementBytes, elementCount } from './datatypes'
export { parseBytesTensor, readBytesElements, serializedSize, writeBytesTensor } from './bytes-tensor'
export { kserveErrorHandler } from './error-handler'
