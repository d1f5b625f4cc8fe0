/** KServe V2 inference helpers: tensors from JSON, binary data or shared memory, and back. */
export { readInferRequest, InferRequest, type ReadInferRequestOptions } from './infer-request'
export { inferBodyParser, parseInferBody, useInferBodyParser, InferBody, HEADER_LENGTH_HEADER, type InferBodyOptions } from './infer-body'
export { DEFAULT_INFER_LIMITS, DEFAULT_JSON_LIMIT } from './infer-limits'
export { DATATYPES, elementBytes, elementCount } from './datatypes'
export { parseBytesTensor, readBytesElements, serializedSize, writeBytesTensor } from './bytes-tensor'
export { kserveErrorHandler } from './error-handler'
