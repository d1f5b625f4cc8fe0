/**
 * Every error this package answers a client with: Triton's message, word for word where Triton
 * has one (client test suites match them), and the HTTP status. Routes never build messages.
 */

const UINT64_MAX = '18446744073709551615'

/** An error a client caused, with the message and HTTP status to answer it with. */
export class SharedMemoryError extends Error {
  readonly statusCode: number
  /** What went wrong, for programs: `ERR_SHM_<REASON>` (e.g. `ERR_SHM_DUPLICATE_REGION`). */
  readonly code: string

  constructor (statusCode: number, message: string, code = 'ERR_SHM') {
    super(message)
    this.name = 'SharedMemoryError'
    this.statusCode = statusCode
    this.code = code
  }
}

const badRequest = (message: string, code: string) => new SharedMemoryError(400, message, code)

// Registration (SPEC section 2)

export const clientShmDisabled = () => new SharedMemoryError(501,
  "Client shared memory is disabled. Register the plugin with 'allowClientShm: true' to enable.", 'ERR_SHM_CLIENT_SHM_DISABLED')

export const missingField = (field: string) =>
  badRequest(`Shared memory register request has no '${field}' field`, 'ERR_SHM_MISSING_FIELD')

export const invalidField = (field: string, expected: string) =>
  badRequest(`Shared memory register request field '${field}' must be ${expected}`, 'ERR_SHM_INVALID_FIELD')

export const unrepresentableField = (field: string) =>
  invalidField(field, `at most ${Number.MAX_SAFE_INTEGER}: larger integers cannot be represented exactly`)

export const invalidBody = (reason: string) =>
  badRequest(`Shared memory register request is invalid: ${reason}`, 'ERR_SHM_INVALID_BODY')

export const missingRegionName = (memory: 'system' | 'cuda' = 'system') =>
  badRequest(`'region name' is necessary to register ${memory} shared memory region`, 'ERR_SHM_MISSING_REGION_NAME')

export const invalidKey = (name: string, key: string) =>
  badRequest(`cannot register shared memory region '${name}' - invalid shm key '${key}'`, 'ERR_SHM_INVALID_KEY')

export const reservedKey = (name: string, key: string, prefix: string) =>
  badRequest(`cannot register shared memory region '${name}' with key '${key}' ` +
    `as the key contains the reserved prefix '${prefix}'`, 'ERR_SHM_RESERVED_KEY')

export const duplicateRegion = (name: string) =>
  badRequest(`shared memory region '${name}' already in manager`, 'ERR_SHM_DUPLICATE_REGION')

export const unableToOpen = (key: string) =>
  badRequest(`Unable to open shared memory region: '${key}'`, 'ERR_SHM_UNABLE_TO_OPEN')

export const invalidRegisterArgs = (name: string) =>
  badRequest(`failed to register shared memory region '${name}': invalid args`, 'ERR_SHM_INVALID_REGISTER_ARGS')

export const tooManyRegions = (name: string, maxRegions: number) =>
  badRequest(`cannot register shared memory region '${name}': ` +
    `the server allows at most ${maxRegions} registered regions`, 'ERR_SHM_TOO_MANY_REGIONS')

export const regionTooLarge = (name: string, byteSize: number, maxRegionBytes: number) =>
  badRequest(`cannot register shared memory region '${name}': byte_size ${byteSize} ` +
    `exceeds the server's limit of ${maxRegionBytes} bytes per region`, 'ERR_SHM_REGION_TOO_LARGE')

export const totalTooLarge = (name: string, byteSize: number, maxTotalBytes: number) =>
  badRequest(`cannot register shared memory region '${name}': mapping ${byteSize} more bytes ` +
    `would exceed the server's limit of ${maxTotalBytes} bytes in total`, 'ERR_SHM_TOTAL_TOO_LARGE')

export const registryClosed = (name: string) => new SharedMemoryError(503,
  `cannot register shared memory region '${name}': the server is shutting down`, 'ERR_SHM_REGISTRY_CLOSED')

export const cudaNotSupported = (name: string) =>
  badRequest(`failed to register CUDA shared memory region: '${name}', GPUs not supported`, 'ERR_SHM_CUDA_NOT_SUPPORTED')

// Status

export const regionStatusNotFound = (name: string) =>
  new SharedMemoryError(404, `Unable to find system shared memory region: '${name}'`, 'ERR_SHM_REGION_STATUS_NOT_FOUND')

export const cudaRegionStatusNotFound = (name: string) =>
  new SharedMemoryError(404, `Unable to find cuda shared memory region: '${name}'`, 'ERR_SHM_CUDA_REGION_STATUS_NOT_FOUND')

// Use by inference requests (SPEC section 4)

export const regionNotFound = (name: string) =>
  new SharedMemoryError(404, `Unable to find shared memory region: '${name}'`, 'ERR_SHM_REGION_NOT_FOUND')

export const regionTruncated = (name: string) =>
  badRequest(`shared memory region '${name}' is no longer usable: its object was truncated below the region. ` +
    'Unregister it, and register it again once the object is restored', 'ERR_SHM_REGION_TRUNCATED')

export const regionUnavailableHere = (name: string) =>
  badRequest(`shared memory region '${name}' cannot be opened by this server process: ` +
    'its object was removed, replaced or shrunk after it was registered. Unregister it, and register it again', 'ERR_SHM_REGION_UNAVAILABLE')

export const invalidOffset = (name: string) =>
  badRequest(`Invalid offset for shared memory region: '${name}'`, 'ERR_SHM_INVALID_OFFSET')

export const offsetOverflow = (name: string, byteSize: bigint, offset: bigint) =>
  badRequest(`Integer overflow detected: byte_size (${byteSize}) + offset (${offset}) ` +
    `exceeds maximum value (${UINT64_MAX}) for region '${name}'`, 'ERR_SHM_OFFSET_OVERFLOW')

export const invalidRange = (name: string) =>
  badRequest(`Invalid offset + byte size for shared memory region: '${name}'`, 'ERR_SHM_INVALID_RANGE')

export const leaseTooLarge = (name: string, byteSize: bigint, maxBytes: bigint) =>
  badRequest(`shared memory byte size ${byteSize} for region '${name}' exceeds the largest single view ` +
    `this server can hand out (${maxBytes} bytes): split the tensor`, 'ERR_SHM_LEASE_TOO_LARGE')

export const invalidUseArgs = (name: string) =>
  badRequest(`shared memory offset and byte size for region '${name}' must be unsigned integers`, 'ERR_SHM_INVALID_USE_ARGS')

// HTTP

export const restrictedApi = (header: string) =>
  new SharedMemoryError(403, `This API is restricted, expecting header '${header}'`, 'ERR_SHM_RESTRICTED_API')

// gRPC

/** Over gRPC, Triton's words for the restricted API (its `--grpc-restricted-protocol`). */
export const restrictedProtocol = (header: string) =>
  new SharedMemoryError(403, `This protocol is restricted, expecting header '${header}'`, 'ERR_SHM_RESTRICTED_PROTOCOL')

export const invalidParameterType = (parameter: string, tensor: string, expected: string) =>
  badRequest(`invalid value type for '${parameter}' parameter for tensor '${tensor}', expected ${expected}.`, 'ERR_SHM_INVALID_PARAMETER_TYPE')

export const sharedMemoryParameterWithoutRegion = (parameter: string, tensor: string) =>
  badRequest(`'${parameter}' can not be specified without 'shared_memory_region' parameter for tensor '${tensor}'`,
    'ERR_SHM_PARAMETER_WITHOUT_REGION')

export const rawInputContentsCount = (model: string, expected: number, received: number) =>
  badRequest(`expected ${expected} entries of 'raw_input_contents' (one per input not in shared memory) but got ${received} ` +
    `for model '${model}'`, 'ERR_SHM_RAW_INPUT_CONTENTS_COUNT')

export const rawAndTypedContents = (input: string) =>
  badRequest(`contents field must not be specified when using raw_input_contents for '${input}'`, 'ERR_SHM_RAW_AND_TYPED_CONTENTS')

export const contentsAndSharedMemory = (input: string) =>
  badRequest(`input '${input}' sets both 'contents' and 'shared_memory_region': send its data one way only`,
    'ERR_SHM_CONTENTS_AND_SHARED_MEMORY')

export const contentsMismatch = (input: string, datatype: string, field: string | undefined) =>
  badRequest(`contents of input '${input}' do not match its datatype ${datatype}: ` +
    (field === undefined ? 'send it as raw_input_contents or in shared memory' : `set '${field}' only`), 'ERR_SHM_CONTENTS_MISMATCH')

export const methodNotAllowed = () => new SharedMemoryError(405, 'Method Not Allowed', 'ERR_SHM_METHOD_NOT_ALLOWED')

export const malformedPath = () => badRequest('the request path is not valid percent-encoding: ' +
  "encode region names as Python's urllib.parse.quote does", 'ERR_SHM_MALFORMED_PATH')

export const regionNameTooLong = () => new SharedMemoryError(414,
  "the region name is longer than this server accepts: raise Fastify's server option 'maxParamLength' (default 100)",
  'ERR_SHM_REGION_NAME_TOO_LONG')

export const routeNotFound = () => new SharedMemoryError(404, 'Not Found', 'ERR_SHM_ROUTE_NOT_FOUND')

// Inference requests (KServe V2, SPEC section 4)

const tensorFields = (fields: string[]) => fields.map((field) => `'${field}'`).join(' ')

export const inputSourceCount = (setFields: string[]) =>
  badRequest("Input must set only one of the following fields: 'data', 'binary_data_size' in 'parameters', " +
    `'shared_memory_region' in 'parameters'. But ${setFields.length === 0 ? 'no field is set' : `set ${tensorFields(setFields)}`}`, 'ERR_SHM_INPUT_SOURCE_COUNT')

export const inputByteSizeMismatch = (input: string, model: string, expected: number | bigint, received: number) =>
  badRequest(`input byte size mismatch for input '${input}' for model '${model}'. Expected ${expected}, got ${received}`, 'ERR_SHM_INPUT_BYTE_SIZE_MISMATCH')

export const inputElementCountMismatch = (input: string, model: string, expected: number | bigint, received: number) =>
  badRequest(`unexpected number of elements in 'data' for input '${input}' for model '${model}'. ` +
    `Expected ${expected}, got ${received}`, 'ERR_SHM_INPUT_ELEMENT_COUNT_MISMATCH')

export const invalidInputData = (input: string, datatype: string, expected: string) =>
  badRequest(`'data' of input '${input}' holds a value that is not ${expected}, as ${datatype} requires`, 'ERR_SHM_INVALID_INPUT_DATA')

export const datatypeNotJson = (input: string, datatype: string) =>
  badRequest(`input '${input}' has datatype ${datatype}, which cannot be sent as JSON 'data': ` +
    'use the binary data extension or shared memory', 'ERR_SHM_DATATYPE_NOT_JSON')

export const outputBinaryAndSharedMemory = () =>
  badRequest("Output can't set both 'shared_memory_region' and 'binary_data'", 'ERR_SHM_OUTPUT_BINARY_AND_SHARED_MEMORY')

export const outputTooSmall = (output: string, byteSize: number, required: number | bigint) =>
  badRequest(`shared memory size specified with the request for output '${output}' (${byteSize} bytes) ` +
    `should be at least ${required} bytes to hold the results`, 'ERR_SHM_OUTPUT_TOO_SMALL')

export const missingSharedMemoryByteSize = (tensor: string) =>
  badRequest(`'shared_memory_byte_size' must be set with 'shared_memory_region' for tensor '${tensor}'`, 'ERR_SHM_MISSING_SHARED_MEMORY_BYTE_SIZE')

export const invalidTensorParameter = (tensor: string, parameter: string, expected: string) =>
  badRequest(`parameter '${parameter}' of tensor '${tensor}' must be ${expected}`, 'ERR_SHM_INVALID_TENSOR_PARAMETER')

export const inputCountMismatch = (model: string, expected: number, received: number) =>
  badRequest(`expected ${expected} inputs but got ${received} inputs for model '${model}'`, 'ERR_SHM_INPUT_COUNT_MISMATCH')

export const duplicateInput = (input: string) =>
  badRequest(`input '${input}' already exists in request`, 'ERR_SHM_DUPLICATE_INPUT')

export const duplicateOutput = (output: string) =>
  badRequest(`output '${output}' already exists in request`, 'ERR_SHM_DUPLICATE_OUTPUT')

export const batchMismatch = (input: string, model: string) =>
  badRequest(`input '${input}' batch size does not match other inputs for '${model}'`, 'ERR_SHM_BATCH_MISMATCH')

export const batchTooLarge = (maxBatchSize: number, model: string) =>
  badRequest(`inference request batch-size must be <= ${maxBatchSize} for '${model}'`, 'ERR_SHM_BATCH_TOO_LARGE')

export const dataTooDeep = (input: string, depth: number) =>
  badRequest(`'data' of input '${input}' is nested more than ${depth} levels deep`, 'ERR_SHM_DATA_TOO_DEEP')

export const tooManyBytesElements = (tensor: string, count: bigint, maxElements: number) =>
  badRequest(`tensor '${tensor}' has ${count} BYTES elements, more than the server's limit of ${maxElements}`,
    'ERR_SHM_TOO_MANY_BYTES_ELEMENTS')

export const jsonResponseTooLarge = (output: string, maxChars: number) =>
  badRequest(`output '${output}' is too large to send as JSON (a response holds at most ${maxChars} characters of JSON): ` +
    "ask for it as binary data ('binary_data': true) or in shared memory", 'ERR_SHM_JSON_RESPONSE_TOO_LARGE')

export const outputTooLarge = (output: string, maxBytes: number) =>
  badRequest(`output '${output}' is too large to send as binary data (a response holds at most ${maxBytes} bytes of ` +
    'tensor data outside shared memory): ask for it in shared memory', 'ERR_SHM_OUTPUT_TOO_LARGE')

export const jsonRequestTooLarge = (byteSize: number, maxBytes: number) =>
  invalidInferRequest(`its JSON is ${byteSize} bytes, more than the server's limit of ${maxBytes}: ` +
    'send tensors as binary data or in shared memory')

export const unexpectedInput = (input: string, model: string) =>
  badRequest(`unexpected inference input '${input}' for model '${model}'`, 'ERR_SHM_UNEXPECTED_INPUT')

export const unexpectedOutput = (output: string, model: string) =>
  badRequest(`unexpected inference output '${output}' for model '${model}'`, 'ERR_SHM_UNEXPECTED_OUTPUT')

export const inputDatatypeMismatch = (received: string, expected: string, model: string) =>
  badRequest(`inference input data-type is '${received}', model expects '${expected}' for '${model}'`, 'ERR_SHM_INPUT_DATATYPE_MISMATCH')

export const inputShapeMismatch = (input: string, model: string, expected: number[], received: number[]) =>
  badRequest(`unexpected shape for input '${input}' for model '${model}'. ` +
    `Expected [${expected.join(',')}], got [${received.join(',')}]`, 'ERR_SHM_INPUT_SHAPE_MISMATCH')

export const malformedBytesTensor = (tensor: string) =>
  badRequest(`BYTES data of tensor '${tensor}' is malformed: each element must be a 4-byte little-endian length ` +
    'followed by that many bytes, filling the tensor exactly', 'ERR_SHM_MALFORMED_BYTES_TENSOR')

// Models run by ONNX Runtime (fastify-triton-shm/onnxruntime)

export const onnxDatatypeUnsupported = (tensor: string, datatype: string) =>
  badRequest(`tensor '${tensor}' has datatype ${datatype}, which ONNX Runtime cannot take`, 'ERR_SHM_ONNX_DATATYPE')

export const onnxRunnerClosed = () =>
  new SharedMemoryError(503, 'the ONNX runner is closed: the server is shutting down', 'ERR_SHM_ONNX_RUNNER_CLOSED')

/** ONNX Runtime's own message, without the paths of its source files that it names. */
export const onnxRunFailed = (message: string) =>
  badRequest(`ONNX Runtime refused the request: ${message.replace(/(?:[A-Za-z]:)?(?:[\\/][\w.@+-]+)+(?::\d+)?\s*/g, '').trim()}`,
    'ERR_SHM_ONNX_RUN_FAILED')

/** 499: nginx's "client closed request", logged like any client error and never sent. */
export const clientClosedRequest = () => new SharedMemoryError(499, 'the client closed the request', 'ERR_SHM_CLIENT_CLOSED_REQUEST')

export const invalidInferRequest = (reason: string) =>
  badRequest(`Unable to parse inference request: ${reason}`, 'ERR_SHM_INVALID_INFER_REQUEST')

// Models (the model table, KServe V2 model endpoints): Triton's texts and statuses

export const unknownModel = (model: string) =>
  new SharedMemoryError(404, `Request for unknown model: '${model}' is not found`, 'ERR_SHM_UNKNOWN_MODEL')

export const unknownModelVersion = (model: string, version: string) =>
  new SharedMemoryError(404, `Request for unknown model: '${model}' version ${version} is not found`, 'ERR_SHM_UNKNOWN_MODEL_VERSION')

export const invalidModelVersion = (version: string) =>
  badRequest(`Invalid model version: '${version}' is not a number`, 'ERR_SHM_INVALID_MODEL_VERSION')

export const noAvailableVersion = (model: string) =>
  new SharedMemoryError(404, `Request for unknown model: '${model}' has no available versions`, 'ERR_SHM_NO_AVAILABLE_VERSION')

/** 503: Triton's UNAVAILABLE, for a version that exists but is not ready. */
export const modelVersionNotReady = (model: string, version: string) =>
  new SharedMemoryError(503, `Request for unknown model: '${model}' version ${version} is not at ready state`, 'ERR_SHM_MODEL_NOT_READY')

// The shared registry (sharedRegistry option)

/** The store failed (busy beyond its timeout, corrupt, removed): nothing was changed. The cause,
 * which may name the file, is kept for the server's log and never sent. */
export const storeFailed = (cause: unknown) => Object.assign(new SharedMemoryError(500,
  'the shared memory registry is unavailable, try again', 'ERR_SHM_STORE_FAILED'), { cause })
