/**
 * Every error of this package, as one table of codes (`errorCodes`): each code has a kind that no
 * transport owns, and each face maps a kind to its own status once (lib/http/http-status.ts,
 * lib/grpc/status.ts). Messages are Triton's, word for word where Triton has one: client test
 * suites match them. Nothing here knows HTTP or gRPC, and this module imports nothing.
 */

/**
 * What an error is, whatever the transport that answers it:
 * - `invalid`: the request is wrong (HTTP 400, gRPC INVALID_ARGUMENT);
 * - `exists`: it names something that exists already (400, ALREADY_EXISTS: Triton's pair);
 * - `not-found`: it names something unknown (404, NOT_FOUND);
 * - `unusable`: it names shared memory the server cannot use as asked, an object it cannot open or
 *   a region too small for a result (400: the client's doing; INTERNAL over gRPC, as Triton);
 * - `denied`: the caller may not reach what it names (403, PERMISSION_DENIED);
 * - `restricted`: the API is restricted and the caller lacks the header (403, UNAVAILABLE as Triton);
 * - `unsupported`: switched off in this server (501, UNIMPLEMENTED);
 * - `unavailable`: not now, try later (503, UNAVAILABLE);
 * - `exhausted`: the server's capacity is used up for now (503 with Retry-After, RESOURCE_EXHAUSTED);
 * - `cancelled`: the client went away (499, never sent; CANCELLED);
 * - `internal`: the server failed, with a message that is safe to send (500, INTERNAL);
 * - `method-not-allowed`, `too-long`: HTTP's own (405 with Allow; 414);
 * - `usage`: a mistake in the host's code or options, thrown as a TypeError at startup (or to the
 *   host's own call), never answered to a client (a 500 with its message hidden if one reaches it);
 * - `setup`: the environment cannot serve a feature (a package missing, a store that cannot
 *   open), thrown as an Error to the host;
 * - `system`: a system call of the addon's low-level functions failed (`PosixShmError`).
 */
export type ErrorKind =
  | 'invalid' | 'exists' | 'not-found' | 'unusable' | 'denied' | 'restricted' | 'unsupported'
  | 'unavailable' | 'exhausted' | 'cancelled' | 'internal' | 'method-not-allowed' | 'too-long'
  | 'usage' | 'setup' | 'system'

/** The kinds a client is answered with. */
export type AnsweredKind = Exclude<ErrorKind, 'usage' | 'setup' | 'system'>

/** An error a client is answered with: its code, its kind and Triton's message. */
export class TritonError extends Error {
  /** What went wrong, for programs: `ERR_SHM_<REASON>` (e.g. `ERR_SHM_DUPLICATE_REGION`). */
  readonly code: string
  readonly kind: AnsweredKind

  constructor (code: string, kind: AnsweredKind, message: string) {
    super(message)
    this.name = 'TritonError'
    this.code = code
    this.kind = kind
  }
}

/** An error of the host's code or environment (`usage`, `setup`), with its code. */
export type CodedError = Error & { readonly code: string }

const table: Record<string, ErrorKind> = {}

/** The largest size Triton counts in (an int64_t). */
const INT64_MAX = 2n ** 63n - 1n

/** A shape as Triton prints one, its dimensions exact (those above 2^53 as JSON gave them to JavaScript). */
const shapeText = (shape: number[]) => `[${shape.map((dim) => BigInt(dim)).join(',')}]`

function declare (code: string, kind: ErrorKind): string {
  table[code] = kind
  return code
}

/** Declares `code` and returns the factory of its errors. */
function answered<Args extends unknown[]> (code: string, kind: AnsweredKind, message: (...args: Args) => string) {
  declare(code, kind)
  return (...args: Args) => new TritonError(code, kind, message(...args))
}

const invalid = <Args extends unknown[]> (code: string, message: (...args: Args) => string) => answered(code, 'invalid', message)

function usage<Args extends unknown[]> (code: string, message: (...args: Args) => string) {
  declare(code, 'usage')
  return (...args: Args): CodedError => Object.assign(new TypeError(message(...args)), { code })
}

function setup<Args extends unknown[]> (code: string, message: (...args: Args) => string) {
  declare(code, 'setup')
  return (cause: unknown, ...args: Args): CodedError => Object.assign(new Error(message(...args), { cause }), { code })
}

const UINT64_MAX = '18446744073709551615'

// Registration (SPEC section 2)

export const clientShmDisabled = answered('ERR_SHM_CLIENT_SHM_DISABLED', 'unsupported', () =>
  "Client shared memory is disabled. Register the plugin with 'allowClientShm: true' to enable.")

export const missingField = invalid('ERR_SHM_MISSING_FIELD', (field: string) =>
  `Shared memory register request has no '${field}' field`)

export const invalidField = invalid('ERR_SHM_INVALID_FIELD', (field: string, expected: string) =>
  `Shared memory register request field '${field}' must be ${expected}`)

export const unrepresentableField = (field: string) =>
  invalidField(field, `at most ${Number.MAX_SAFE_INTEGER}: larger integers cannot be represented exactly`)

export const invalidBody = invalid('ERR_SHM_INVALID_BODY', (reason: string) =>
  `Shared memory register request is invalid: ${reason}`)

export const missingRegionName = invalid('ERR_SHM_MISSING_REGION_NAME', (memory: 'system' | 'cuda' = 'system') =>
  `'region name' is necessary to register ${memory} shared memory region`)

export const invalidKey = invalid('ERR_SHM_INVALID_KEY', (name: string, key: string) =>
  `cannot register shared memory region '${name}' - invalid shm key '${key}'`)

export const reservedKey = invalid('ERR_SHM_RESERVED_KEY', (name: string, key: string, prefix: string) =>
  `cannot register shared memory region '${name}' with key '${key}' as the key contains the reserved prefix '${prefix}'`)

export const duplicateRegion = answered('ERR_SHM_DUPLICATE_REGION', 'exists', (name: string) =>
  `shared memory region '${name}' already in manager`)

export const unableToOpen = answered('ERR_SHM_UNABLE_TO_OPEN', 'unusable', (key: string) =>
  `Unable to open shared memory region: '${key}'`)

export const invalidRegisterArgs = invalid('ERR_SHM_INVALID_REGISTER_ARGS', (name: string) =>
  `failed to register shared memory region '${name}': invalid args`)

export const tooManyRegions = invalid('ERR_SHM_TOO_MANY_REGIONS', (name: string, maxRegions: number) =>
  `cannot register shared memory region '${name}': the server allows at most ${maxRegions} registered regions`)

export const regionTooLarge = invalid('ERR_SHM_REGION_TOO_LARGE', (name: string, byteSize: number, maxRegionBytes: number) =>
  `cannot register shared memory region '${name}': byte_size ${byteSize} exceeds the server's limit of ${maxRegionBytes} bytes per region`)

export const totalTooLarge = invalid('ERR_SHM_TOTAL_TOO_LARGE', (name: string, byteSize: number, maxTotalBytes: number) =>
  `cannot register shared memory region '${name}': mapping ${byteSize} more bytes ` +
  `would exceed the server's limit of ${maxTotalBytes} bytes in total`)

export const accessDenied = answered('ERR_SHM_ACCESS_DENIED', 'denied', (name: string, key: string) =>
  `cannot register shared memory region '${name}' with key '${key}': the connecting user may not open this object read-write`)

export const peerUnknown = answered('ERR_SHM_PEER_UNKNOWN', 'denied', (name: string) =>
  `cannot register shared memory region '${name}': the connecting client's user cannot be found on this host ` +
  '(a client on another host or in another network namespace, or behind a proxy). Register from this host, or set the ' +
  "plugin option 'clientShmAccess: \"any\"' to let any client register any object the server can open")

export const registryClosed = answered('ERR_SHM_REGISTRY_CLOSED', 'unavailable', (name: string) =>
  `cannot register shared memory region '${name}': the server is shutting down`)

export const invalidCudaHandle = invalid('ERR_SHM_INVALID_CUDA_HANDLE', () =>
  'failed to register shared memory region: invalid args')

export const cudaNotSupported = invalid('ERR_SHM_CUDA_NOT_SUPPORTED', (name: string) =>
  `failed to register CUDA shared memory region: '${name}', GPUs not supported`)

// Status

export const regionStatusNotFound = answered('ERR_SHM_REGION_STATUS_NOT_FOUND', 'not-found', (name: string) =>
  `Unable to find system shared memory region: '${name}'`)

export const cudaRegionStatusNotFound = answered('ERR_SHM_CUDA_REGION_STATUS_NOT_FOUND', 'not-found', (name: string) =>
  `Unable to find cuda shared memory region: '${name}'`)

// Use by inference requests (SPEC section 4)

export const regionNotFound = answered('ERR_SHM_REGION_NOT_FOUND', 'not-found', (name: string) =>
  `Unable to find shared memory region: '${name}'`)

export const regionTruncated = invalid('ERR_SHM_REGION_TRUNCATED', (name: string) =>
  `shared memory region '${name}' is no longer usable: its object was truncated below the region. ` +
  'Unregister it, and register it again once the object is restored')

export const regionUnavailableHere = invalid('ERR_SHM_REGION_UNAVAILABLE', (name: string) =>
  `shared memory region '${name}' cannot be opened by this server process: ` +
  'its object was removed, replaced or shrunk after it was registered. Unregister it, and register it again')

export const invalidOffset = invalid('ERR_SHM_INVALID_OFFSET', (name: string) =>
  `Invalid offset for shared memory region: '${name}'`)

export const offsetOverflow = invalid('ERR_SHM_OFFSET_OVERFLOW', (name: string, byteSize: bigint, offset: bigint) =>
  `Integer overflow detected: byte_size (${byteSize}) + offset (${offset}) exceeds maximum value (${UINT64_MAX}) for region '${name}'`)

export const invalidRange = invalid('ERR_SHM_INVALID_RANGE', (name: string) =>
  `Invalid offset + byte size for shared memory region: '${name}'`)

export const leaseTooLarge = invalid('ERR_SHM_LEASE_TOO_LARGE', (name: string, byteSize: bigint, maxBytes: bigint) =>
  `shared memory byte size ${byteSize} for region '${name}' exceeds the largest single view ` +
  `this server can hand out (${maxBytes} bytes): split the tensor`)

export const invalidUseArgs = invalid('ERR_SHM_INVALID_USE_ARGS', (name: string) =>
  `shared memory offset and byte size for region '${name}' must be unsigned integers`)

// Access to the API (SPEC section 5)

export const restrictedApi = answered('ERR_SHM_RESTRICTED_API', 'restricted', (header: string) =>
  `This API is restricted, expecting header '${header}'`)

/** Over gRPC, Triton's words for the restricted API (its `--grpc-restricted-protocol`). */
export const restrictedProtocol = answered('ERR_SHM_RESTRICTED_PROTOCOL', 'restricted', (header: string) =>
  `This protocol is restricted, expecting header '${header}'`)

// HTTP's own

export const methodNotAllowed = answered('ERR_SHM_METHOD_NOT_ALLOWED', 'method-not-allowed', () => 'Method Not Allowed')

export const malformedPath = invalid('ERR_SHM_MALFORMED_PATH', () =>
  "the request path is not valid percent-encoding: encode region names as Python's urllib.parse.quote does")

export const regionNameTooLong = answered('ERR_SHM_REGION_NAME_TOO_LONG', 'too-long', () =>
  "the region name is longer than this server accepts: raise Fastify's server option 'maxParamLength' (default 100)")

export const routeNotFound = answered('ERR_SHM_ROUTE_NOT_FOUND', 'not-found', () => 'Not Found')

// gRPC's own

export const invalidParameterType = invalid('ERR_SHM_INVALID_PARAMETER_TYPE', (parameter: string, tensor: string, expected: string) =>
  `invalid value type for '${parameter}' parameter for tensor '${tensor}', expected ${expected}.`)

export const sharedMemoryParameterWithoutRegion = invalid('ERR_SHM_PARAMETER_WITHOUT_REGION', (parameter: string, tensor: string) =>
  `'${parameter}' can not be specified without 'shared_memory_region' parameter for tensor '${tensor}'`)

export const rawInputContentsCount = invalid('ERR_SHM_RAW_INPUT_CONTENTS_COUNT', (model: string, expected: number, received: number) =>
  `expected ${expected} entries of 'raw_input_contents' (one per input not in shared memory) but got ${received} for model '${model}'`)

export const rawAndTypedContents = invalid('ERR_SHM_RAW_AND_TYPED_CONTENTS', (input: string) =>
  `contents field must not be specified when using raw_input_contents for '${input}'`)

export const contentsAndSharedMemory = invalid('ERR_SHM_CONTENTS_AND_SHARED_MEMORY', (input: string) =>
  `input '${input}' sets both 'contents' and 'shared_memory_region': send its data one way only`)

export const contentsMismatch = invalid('ERR_SHM_CONTENTS_MISMATCH', (input: string, datatype: string, field: string | undefined) =>
  `contents of input '${input}' do not match its datatype ${datatype}: ` +
  (field === undefined ? 'send it as raw_input_contents or in shared memory' : `set '${field}' only`))

export const malformedMessage = invalid('ERR_SHM_MALFORMED_MESSAGE', (message: string, reason: string) =>
  `the ${message} message is not valid protobuf: ${reason}`)

export const messageTooCostly = invalid('ERR_SHM_MESSAGE_TOO_COSTLY', (message: string, byteSize: number, decodedBytes: number, allowed: number) =>
  `the ${message} message of ${byteSize} bytes would take ${decodedBytes} bytes once decoded, more than the ${allowed} ` +
  `the server allows for it${message === 'ModelInferRequest' ? ': send tensors as raw_input_contents or in shared memory' : ''}`)

// Inference requests (KServe V2, SPEC section 4)

const tensorFields = (fields: string[]) => fields.map((field) => `'${field}'`).join(' ')

export const inputSourceCount = invalid('ERR_SHM_INPUT_SOURCE_COUNT', (setFields: string[]) =>
  "Input must set only one of the following fields: 'data', 'binary_data_size' in 'parameters', " +
  `'shared_memory_region' in 'parameters'. But ${setFields.length === 0 ? 'no field is set' : `set ${tensorFields(setFields)}`}`)

export const inputByteSizeMismatch = invalid('ERR_SHM_INPUT_BYTE_SIZE_MISMATCH',
  (input: string, model: string, expected: number | bigint, received: number) =>
    `input byte size mismatch for input '${input}' for model '${model}'. Expected ${expected}, got ${received}`)

/** A BYTES input's JSON `data` with another element count than its shape (Triton counts its
 * strings later, in its core, with words of its own). */
export const inputElementCountMismatch = invalid('ERR_SHM_INPUT_ELEMENT_COUNT_MISMATCH',
  (input: string, model: string, expected: number | bigint, received: number) =>
    `unexpected number of elements in 'data' for input '${input}' for model '${model}'. Expected ${expected}, got ${received}`)

/** Triton's HTTP server, reading JSON `data` against the input's shape: an element past the shape's count. */
export const dataTooManyElements = invalid('ERR_SHM_DATA_TOO_MANY_ELEMENTS', () =>
  "Unable to parse 'data': Shape does not match true shape of 'data' field")

/** Triton's HTTP server, reading JSON `data` against the input's shape: fewer elements than its count. */
export const dataTooFewElements = invalid('ERR_SHM_DATA_TOO_FEW_ELEMENTS', () =>
  "Failed to parse 'data' field: shape does not match true shape")

export const invalidInputData = invalid('ERR_SHM_INVALID_INPUT_DATA', (input: string, datatype: string, expected: string) =>
  `'data' of input '${input}' holds a value that is not ${expected}, as ${datatype} requires`)

export const datatypeNotJson = invalid('ERR_SHM_DATATYPE_NOT_JSON', (input: string, datatype: string) =>
  `input '${input}' has datatype ${datatype}, which cannot be sent as JSON 'data': use the binary data extension or shared memory`)

/** A BYTES output asked for as JSON holding an element that is not UTF-8 (Triton sends its bytes
 * as they are, which its clients then fail to read as JSON). */
export const bytesOutputNotUtf8 = invalid('ERR_SHM_BYTES_OUTPUT_NOT_UNICODE', (output: string) =>
  `output '${output}' holds an element that is not UTF-8, which JSON cannot carry: ask for it as binary data`)

export const outputBinaryAndSharedMemory = invalid('ERR_SHM_OUTPUT_BINARY_AND_SHARED_MEMORY', () =>
  "Output can't set both 'shared_memory_region' and 'binary_data'")

export const outputTooSmall = answered('ERR_SHM_OUTPUT_TOO_SMALL', 'unusable', (output: string, byteSize: number, required: number | bigint) =>
  `shared memory size specified with the request for output '${output}' (${byteSize} bytes) ` +
  `should be at least ${required} bytes to hold the results`)

export const missingSharedMemoryByteSize = invalid('ERR_SHM_MISSING_SHARED_MEMORY_BYTE_SIZE', (tensor: string) =>
  `'shared_memory_byte_size' must be set with 'shared_memory_region' for tensor '${tensor}'`)

export const invalidTensorParameter = invalid('ERR_SHM_INVALID_TENSOR_PARAMETER', (tensor: string, parameter: string, expected: string) =>
  `parameter '${parameter}' of tensor '${tensor}' must be ${expected}`)

/** Triton's names of a request's inputs (`['INPUT0','INPUT1']`). Its list of the missing ones
 * when none is missing is `]` (it drops the `[` as if it were a trailing comma): kept, as its
 * clients read its text. */
const inputNames = (names: string[]) => names.length === 0 ? '[]' : `[${names.map((name) => `'${name}'`).join(',')}]`
const missingNames = (names: string[]) => names.length === 0 ? ']' : inputNames(names)

/** `given` are the request's input names, sorted as Triton lists them; `missing` the model's required inputs it left out. */
export const inputCountMismatch = invalid('ERR_SHM_INPUT_COUNT_MISMATCH',
  (model: string, required: number, total: number, given: string[], missing: string[]) =>
    `${required === total ? `expected ${total} inputs` : `expected number of inputs between ${required} and ${total}`} but got ` +
    `${given.length} inputs for model '${model}'. Got input(s) ${inputNames(given)}, but missing required input(s) ${missingNames(missing)}. ` +
    'Please provide all required input(s).')

export const classificationUnsupported = invalid('ERR_SHM_CLASSIFICATION_UNSUPPORTED', (datatype: string) =>
  `class result not available for output due to unsupported type '${datatype}'`)

export const classificationTooLarge = invalid('ERR_SHM_CLASSIFICATION_TOO_LARGE', () => 'classification output tensor too large')

/** `grpc`: Triton's gRPC server writes it with a small `o`. */
export const outputSharedMemoryAndClassification = invalid('ERR_SHM_OUTPUT_SHARED_MEMORY_AND_CLASSIFICATION', (grpc = false) =>
  `${grpc ? 'output' : 'Output'} can't set both 'shared_memory_region' and 'classification'`)

/** Over gRPC, a `classification` parameter that is no int64_param (Triton's words, without a period). */
export const invalidClassificationType = invalid('ERR_SHM_INVALID_CLASSIFICATION_TYPE', () =>
  "invalid value type for 'classification' parameter, expected int64_param")

/** Over gRPC, a `classification` count of 0 or less (Triton's words). */
export const invalidClassificationCount = invalid('ERR_SHM_INVALID_CLASSIFICATION_COUNT', () =>
  "invalid value for 'classification' parameter, expected >= 0")

export const duplicateInput = invalid('ERR_SHM_DUPLICATE_INPUT', (input: string) => `input '${input}' already exists in request`)

export const duplicateOutput = invalid('ERR_SHM_DUPLICATE_OUTPUT', (output: string) => `output '${output}' already exists in request`)

export const batchMismatch = invalid('ERR_SHM_BATCH_MISMATCH', (input: string, model: string) =>
  `input '${input}' batch size does not match other inputs for '${model}'`)

export const batchTooLarge = invalid('ERR_SHM_BATCH_TOO_LARGE', (maxBatchSize: number, model: string) =>
  `inference request batch-size must be <= ${maxBatchSize} for '${model}'`)

/** Triton words it as it reads the data: BYTES elements are first measured, the others read into
 * their tensor, which puts its "Unable to parse 'data'" before the reason. */
export const dataTooDeep = invalid('ERR_SHM_DATA_TOO_DEEP', (depth: number, whileParsing: boolean) =>
  `${whileParsing ? "Unable to parse 'data': " : ''}JSON nesting depth exceeds maximum allowed limit (${depth})`)

export const tooManyBytesElements = invalid('ERR_SHM_TOO_MANY_BYTES_ELEMENTS', (tensor: string, count: bigint, maxElements: number) =>
  `tensor '${tensor}' has ${count} BYTES elements, more than the server's limit of ${maxElements}`)

export const jsonResponseTooLarge = invalid('ERR_SHM_JSON_RESPONSE_TOO_LARGE', (output: string, maxChars: number) =>
  `output '${output}' is too large to send as JSON (a response holds at most ${maxChars} characters of JSON): ` +
  "ask for it as binary data ('binary_data': true) or in shared memory")

export const outputTooLarge = invalid('ERR_SHM_OUTPUT_TOO_LARGE', (output: string, maxBytes: number) =>
  `output '${output}' is too large to send as binary data (a response holds at most ${maxBytes} bytes of ` +
  'tensor data outside shared memory): ask for it in shared memory')

// What all requests in flight hold together (the registry's `maxInFlightBytes`)

export const serverBusy = answered('ERR_SHM_SERVER_BUSY', 'exhausted', (held: number, maxBytes: number, needed: number) =>
  `the server holds ${held} bytes for requests in flight, of its limit of ${maxBytes}: this request needs ${needed} more. ` +
  'Try again later')

export const inFlightTooLarge = invalid('ERR_SHM_IN_FLIGHT_TOO_LARGE', (needed: number, maxBytes: number) =>
  `this request needs ${needed} bytes in flight, more than the server holds for all requests together (${maxBytes}): ` +
  'send tensors in shared memory')

export const invalidInferRequest = invalid('ERR_SHM_INVALID_INFER_REQUEST', (reason: string) =>
  `Unable to parse inference request: ${reason}`)

// An input's shape in an HTTP request's JSON, as Triton's HTTP server reads it: a dimension that is
// no unsigned integer is its JSON reader's failure (500), the others are checked for JSON data.

export const shapeNotUnsigned = answered('ERR_SHM_SHAPE_NOT_UNSIGNED', 'internal', () =>
  "Unable to parse 'shape': attempt to access JSON non-unsigned-integer as unsigned-integer")

export const shapeInvalidDimensions = invalid('ERR_SHM_SHAPE_INVALID_DIMENSIONS', (input: string, shape: number[]) =>
  `invalid shape for input '${input}': shape ${shapeText(shape)} contains one or more invalid dimensions`)

export const shapeElementCountOverflow = invalid('ERR_SHM_SHAPE_ELEMENT_COUNT_OVERFLOW', (input: string, shape: number[]) =>
  `invalid shape for input '${input}': shape ${shapeText(shape)} causes total element count to exceed maximum size of ${INT64_MAX}`)

export const inputByteSizeOverflow = invalid('ERR_SHM_INPUT_BYTE_SIZE_OVERFLOW', (input: string, elements: bigint, elementBytes: number) =>
  `byte size overflow for input '${input}': element count (${elements}) * data type size (${elementBytes}) ` +
  `exceeds maximum allowed size (${INT64_MAX})`)

// Triton's `--http-max-input-size`, the infer body parser's `jsonLimit`: Triton's texts name its flag.

export const jsonRequestTooLarge = invalid('ERR_SHM_JSON_REQUEST_TOO_LARGE', (byteSize: number, maxBytes: number) =>
  `request JSON size of ${byteSize} bytes exceeds the maximum allowed input size of ${maxBytes} bytes. ` +
  'Use --http-max-input-size to increase the limit.')

export const rawInputTooLarge = invalid('ERR_SHM_RAW_INPUT_TOO_LARGE', (byteSize: number, maxBytes: number) =>
  `Raw input has a byte_size (${byteSize} bytes) that exceeds the maximum allowed value of ${maxBytes} bytes. ` +
  'Use --http-max-input-size to increase the limit.')

export const decompressedTooLarge = invalid('ERR_SHM_DECOMPRESSED_TOO_LARGE', (maxBytes: number) =>
  `Decompressed data size exceeds the maximum allowed value of ${maxBytes} bytes. Use --http-max-input-size to increase the limit.`)

// Request bodies over HTTP: their transfer and content codings, as Triton's HTTP server takes them

/** Answered with `Accept-Encoding: gzip, deflate`, as Triton does. */
export const unsupportedCompression = answered('ERR_SHM_UNSUPPORTED_COMPRESSION', 'unsupported', () => 'Unsupported compression type')

export const nothingToDecompress = invalid('ERR_SHM_NOTHING_TO_DECOMPRESS', () => 'nothing to be decompressed')

/** A body that is not the compressed data its `Content-Encoding` says (zlib's reason after it). */
export const malformedCompressedBody = invalid('ERR_SHM_MALFORMED_COMPRESSED_BODY', (encoding: string, reason: string) =>
  `Unable to parse inference request: the body is not valid ${encoding} data: ${reason}`)

export const tooManyChunks = invalid('ERR_SHM_TOO_MANY_CHUNKS', (maxChunks: number) =>
  `Chunked request body exceeds maximum of ${maxChunks} non-empty chunks. Send fewer or larger HTTP chunks.`)

// Triton's raw request (`Inference-Header-Content-Length: 0`): its core words these for the request,
// which has no id

const RAW_REQUEST = '[request id: <id_unknown>] '

export const rawRequestInputCount = invalid('ERR_SHM_RAW_REQUEST_INPUT_COUNT', (modelInputs: number, model: string) =>
  `${RAW_REQUEST}Raw request must only have 1 input (found 1) to be deduced but got ${modelInputs} inputs in '${model}' model configuration`)

export const rawRequestShape = invalid('ERR_SHM_RAW_REQUEST_SHAPE', (input: string) =>
  `${RAW_REQUEST}The shape of the raw input '${input}' can not be deduced because there are more than one variable-sized dimension`)

export const rawRequestBytesShape = invalid('ERR_SHM_RAW_REQUEST_BYTES_SHAPE', (input: string) =>
  `${RAW_REQUEST}For BYTE datatype raw input '${input}', the model must have input shape [1]`)

export const unexpectedInput = invalid('ERR_SHM_UNEXPECTED_INPUT', (input: string, model: string) =>
  `unexpected inference input '${input}' for model '${model}'`)

export const unexpectedOutput = invalid('ERR_SHM_UNEXPECTED_OUTPUT', (output: string, model: string) =>
  `unexpected inference output '${output}' for model '${model}'`)

export const inputDatatypeMismatch = invalid('ERR_SHM_INPUT_DATATYPE_MISMATCH', (received: string, expected: string, model: string) =>
  `inference input data-type is '${received}', model expects '${expected}' for '${model}'`)

export const inputShapeMismatch = invalid('ERR_SHM_INPUT_SHAPE_MISMATCH', (input: string, model: string, expected: number[], received: number[]) =>
  `unexpected shape for input '${input}' for model '${model}'. Expected [${expected.join(',')}], got [${received.join(',')}]`)

export const malformedBytesTensor = invalid('ERR_SHM_MALFORMED_BYTES_TENSOR', (tensor: string) =>
  `BYTES data of tensor '${tensor}' is malformed: each element must be a 4-byte little-endian length ` +
  'followed by that many bytes, filling the tensor exactly')

/** 499: nginx's "client closed request", logged like any client error and never sent. */
export const clientClosedRequest = answered('ERR_SHM_CLIENT_CLOSED_REQUEST', 'cancelled', () => 'the client closed the request')

// Models run by ONNX Runtime (fastify-triton-shm/onnxruntime)

export const onnxDatatypeUnsupported = invalid('ERR_SHM_ONNX_DATATYPE', (tensor: string, datatype: string) =>
  `tensor '${tensor}' has datatype ${datatype}, which ONNX Runtime cannot take`)

export const onnxRunnerClosed = answered('ERR_SHM_ONNX_RUNNER_CLOSED', 'unavailable', () =>
  'the ONNX runner is closed: the server is shutting down')

/** ONNX Runtime's own message, without the paths of its source files that it names. */
export const onnxRunFailed = invalid('ERR_SHM_ONNX_RUN_FAILED', (message: string) =>
  `ONNX Runtime refused the request: ${message.replace(/(?:[A-Za-z]:)?(?:[\\/][\w.@+-]+)+(?::\d+)?\s*/g, '').trim()}`)

// Models (the model table, KServe V2 model endpoints): Triton's texts

export const unknownModel = answered('ERR_SHM_UNKNOWN_MODEL', 'not-found', (model: string) =>
  `Request for unknown model: '${model}' is not found`)

export const unknownModelVersion = answered('ERR_SHM_UNKNOWN_MODEL_VERSION', 'not-found', (model: string, version: string) =>
  `Request for unknown model: '${model}' version ${version} is not found`)

export const invalidModelVersion = invalid('ERR_SHM_INVALID_MODEL_VERSION', (version: string) =>
  `Invalid model version: '${version}' is not a number`)

export const noAvailableVersion = answered('ERR_SHM_NO_AVAILABLE_VERSION', 'not-found', (model: string) =>
  `Request for unknown model: '${model}' has no available versions`)

/** Triton's UNAVAILABLE, for a version that exists but is not ready. */
export const modelVersionNotReady = answered('ERR_SHM_MODEL_NOT_READY', 'unavailable', (model: string, version: string) =>
  `Request for unknown model: '${model}' version ${version} is not at ready state`)

// The model repository extension (index, load, unload): Triton's texts

/** Triton's INTERNAL for a model its repository does not hold: here, one the table does not declare. */
export const loadUnknownModel = answered('ERR_SHM_LOAD_UNKNOWN_MODEL', 'internal', (model: string) =>
  `failed to load '${model}', failed to poll from model repository`)

/** Triton's INTERNAL for a load's file it cannot write (a path component longer than NAME_MAX). */
export const loadFileUnwritable = answered('ERR_SHM_LOAD_FILE_UNWRITABLE', 'internal', (model: string) =>
  `failed to load '${model}', failed to poll from model repository`)

/** Triton's INVALID_ARG for a name to load that is blank once its whitespace is trimmed. */
export const modelNameEmpty = invalid('ERR_SHM_MODEL_NAME_EMPTY', () =>
  'Model name cannot be empty. Please enter a valid name to deploy.')

/** Triton's INVALID_ARG for a name to load that could reach outside its repository (`..`, or a `/`). */
export const modelNameTraversal = invalid('ERR_SHM_MODEL_NAME_TRAVERSAL', (model: string) =>
  `invalid model name '${model}', model name must not contain path traversal characters`)

/** Triton's UNAVAILABLE for a load or an unload in model control mode `none` (its default). */
export const modelControlDisabled = answered('ERR_SHM_MODEL_CONTROL_DISABLED', 'unavailable', () =>
  'explicit model load / unload is not allowed if polling is enabled')

export const loadFailed = invalid('ERR_SHM_LOAD_FAILED', (model: string, version: string, reason: string) =>
  `load failed for model '${model}': version ${version} is at UNAVAILABLE state: ${reason};`)

/** A configuration or files sent with a load are code for the server to run: only if the host says so. */
export const loadOverridesRefused = answered('ERR_SHM_LOAD_OVERRIDES_REFUSED', 'denied', (model: string, reason: string) =>
  `failed to load '${model}': ${reason}`)

export const unrecognizedLoadParameter = invalid('ERR_SHM_UNRECOGNIZED_LOAD_PARAMETER', (parameter: string) =>
  `unrecognized load parameter '${parameter}'.`)

export const invalidLoadParameterType = invalid('ERR_SHM_INVALID_LOAD_PARAMETER_TYPE', (parameter: string, expected: string) =>
  `invalid value type for load parameter '${parameter}', expected ${expected}.`)

export const invalidUnloadDependents = invalid('ERR_SHM_INVALID_UNLOAD_DEPENDENTS', (expected: string) =>
  `invalid value type for 'unload_dependents' parameter, expected ${expected}.`)

export const invalidIndexReady = invalid('ERR_SHM_INVALID_INDEX_READY', () => "Invalid value for 'ready': expected a boolean")

export const repositoryNameUnsupported = answered('ERR_SHM_REPOSITORY_NAME_UNSUPPORTED', 'unsupported', () =>
  "'repository_name' specification is not supported")

export const invalidRepositoryRequest = invalid('ERR_SHM_INVALID_REPOSITORY_REQUEST', (reason: string) =>
  `failed to parse the request JSON buffer: ${reason}`)

// The logging extension (`/v2/logging`, LogSettings): Triton's texts

export const logFileUnsupported = answered('ERR_SHM_LOG_FILE_UNSUPPORTED', 'unsupported', () =>
  'log file location can not be updated through network protocol')

export const invalidLoggingRequest = invalid('ERR_SHM_INVALID_LOGGING_REQUEST', (reason: string) =>
  `failed to parse the request JSON buffer: ${reason}`)

/** Over HTTP, a setting of the wrong JSON type, in TritonJson's words (`boolean`, `unsigned-integer`, `string`). */
export const logSettingJsonType = invalid('ERR_SHM_LOG_SETTING_JSON_TYPE', (type: 'boolean' | 'unsigned-integer' | 'string') =>
  `attempt to access JSON non-${type} as ${type}`)

/** Over gRPC, a setting sent in another `parameter_choice` than its own. */
export const logSettingParamType = invalid('ERR_SHM_LOG_SETTING_PARAM_TYPE', (expected: 'boolean' | 'int32' | 'string', setting: string) =>
  `expect ${expected} for '${setting}'`)

/** A format other than `default` and `ISO8601`; Triton names the setting `--log_format` over HTTP, `log_format` over gRPC. */
export const invalidLogFormat = invalid('ERR_SHM_INVALID_LOG_FORMAT', (setting: '--log_format' | 'log_format', got: string) =>
  `invalid argument for ${setting}, got: ${got}`)

// Triton's trace extension (`/v2/trace/setting`, gRPC TraceSetting): Triton's texts

export const traceUnknownModel = invalid('ERR_SHM_TRACE_UNKNOWN_MODEL', (model: string) =>
  `Request for unknown model : ${model}`)

export const traceFileReadOnly = answered('ERR_SHM_TRACE_FILE_READ_ONLY', 'unsupported', () =>
  'trace file location can not be updated through network protocol')

export const traceLevelOffAlone = invalid('ERR_SHM_TRACE_LEVEL_OFF_ALONE', () =>
  "Expect only one trace level 'OFF' is specified")

/** A setting whose text does not begin with an integer (Triton reads it with `std::stoi`). */
export const unparsableTraceSetting = invalid('ERR_SHM_UNPARSABLE_TRACE_SETTING', (setting: string, value: string) =>
  `Unable to parse '${setting}', got: ${value}`)

export const traceSettingOutOfRange = invalid('ERR_SHM_TRACE_SETTING_OUT_OF_RANGE', (setting: string, min: number, max: number, value: string) =>
  `Unable to parse '${setting}', value is out of range [ ${min}, ${max} ], got: ${value}`)

/** `trace_count` below -1; Triton's HTTP text has no space after `got:`, its gRPC text has one. */
export const traceCountTooSmall = invalid('ERR_SHM_TRACE_COUNT_TOO_SMALL', (value: string, transport: 'http' | 'grpc') =>
  `Unable to parse 'trace_count'. Expecting value >= -1, got:${transport === 'http' ? '' : ' '}${value}`)

/** Over gRPC, a setting given more than one value. */
export const traceSettingValues = invalid('ERR_SHM_TRACE_SETTING_VALUES', (setting: string) =>
  `expect only 1 value for '${setting}'`)

/** Over HTTP, a setting of the wrong JSON type, in TritonJson's words. */
export const traceSettingType = invalid('ERR_SHM_TRACE_SETTING_TYPE', (expected: 'string' | 'array') =>
  `attempt to access JSON non-${expected} as ${expected}`)

/** The settings would trace nothing though tracing is on (`reason` empty: `trace_count` 0). */
export const invalidTraceSetting = invalid('ERR_SHM_INVALID_TRACE_SETTING', (reason: string) =>
  `Attempting to set invalid trace setting :${reason}`)

export const invalidTraceRequest = invalid('ERR_SHM_INVALID_TRACE_REQUEST', (reason: string) =>
  `failed to parse the request JSON buffer: ${reason}`)

// Sequences, decoupled models and streams (Triton's sequence extension, ModelStreamInfer): Triton's texts

/** A request's flags over HTTP that are not of their type (Triton's TritonJson reads them). */
export const unparsableRequestParameter = invalid('ERR_SHM_UNPARSABLE_REQUEST_PARAMETER', (parameter: string, reason: string) =>
  `Unable to parse '${parameter}': ${reason}`)

/** A request parameter for the model that is no string, number or boolean (Triton's HTTP words). */
export const invalidRequestParameter = invalid('ERR_SHM_INVALID_REQUEST_PARAMETER', (parameter: string) =>
  `parameter '${parameter}' has invalid type. It should be either 'int', 'bool', or 'string'.`)

/** Over gRPC, a request parameter of the wrong type. */
export const invalidRequestParameterType = invalid('ERR_SHM_INVALID_REQUEST_PARAMETER_TYPE', (parameter: string, expected: string) =>
  `invalid value type for '${parameter}' parameter, expected ${expected}.`)

export const reservedParameter = invalid('ERR_SHM_RESERVED_PARAMETER', (allowed?: string[]) => allowed === undefined
  ? "parameter keys starting with 'triton_' are reserved for Triton usage and should not be specified."
  : "parameter keys starting with 'triton_' are reserved for Triton usage. Only the following keys starting with 'triton_' are " +
    `allowed: ${allowed.join(' ')}`)

export const correlationIdTooLong = answered('ERR_SHM_CORRELATION_ID_TOO_LONG', 'unsupported', () =>
  'string correlation ID cannot be longer than 128 characters')

export const missingCorrelationId = invalid('ERR_SHM_MISSING_CORRELATION_ID', (model: string) =>
  `inference request to model '${model}' must specify a non-zero or non-empty correlation ID`)

export const sequenceNotStarted = invalid('ERR_SHM_SEQUENCE_NOT_STARTED', (correlationId: string, model: string) =>
  `inference request for sequence ${correlationId} to model '${model}' must specify the START flag on the first request of the sequence`)

export const sequenceBatchSize = invalid('ERR_SHM_SEQUENCE_BATCH_SIZE', (model: string) =>
  `inference request to model '${model}' must specify batch-size 1 due to requirements of sequence batcher`)

/** Triton names the request (`[request id: <id>] `, `<id_unknown>` without one). */
export const correlationIdDatatype = invalid('ERR_SHM_CORRELATION_ID_DATATYPE',
  (requestId: string | undefined, control: string, received: string, model: string, expected: string) =>
    `[request id: ${requestId === undefined || requestId === '' ? '<id_unknown>' : requestId}] sequence batching control '${control}' ` +
    `data-type is '${received}', but model '${model}' expects '${expected}'`)

/** A decoupled model over a call that carries one response; `endpoint`: Triton's words for it. */
export const decoupledNotSupported = answered('ERR_SHM_DECOUPLED_NOT_SUPPORTED', 'unsupported', (endpoint: 'HTTP end point' | 'ModelInfer RPC') =>
  `${endpoint} doesn't support models with decoupled transaction policy`)

// The generate extension (POST .../generate, .../generate_stream): Triton's texts

/** An input of a generate request whose elements take more than the input size limit once typed
 * (`consumed`: the bytes of the inputs before it). */
export const generateInputTooLarge = invalid('ERR_SHM_GENERATE_INPUT_TOO_LARGE', (consumed: number, input: string, byteSize: number, maxBytes: number) =>
  `request size of ${consumed} bytes with input '${input}' of size ${byteSize} bytes exceeds the maximum allowed input size of ${maxBytes}. ` +
  'Use --http-max-input-size to increase the limit.')

/** A generate request's value whose element count fits no shape of its input. */
export const generateInputShape = invalid('ERR_SHM_GENERATE_INPUT_SHAPE', (input: string) =>
  `The schema can not convert input '${input}' to tensor with proper shape`)

/** A generate request's value of the wrong JSON type for its input (`reading`: Triton's words for
 * what it was reading; `accessed`: TritonJson's, e.g. `non-string as string`). */
export const generateInputType = invalid('ERR_SHM_GENERATE_INPUT_TYPE', (reading: string, accessed: string) =>
  `${reading}: attempt to access JSON ${accessed}`)

/** A generate request's keyword of a nested schema (`parameters`) that is also an input's name, or is no object. */
export const generateKeywordInput = invalid('ERR_SHM_GENERATE_KEYWORD_INPUT', (keyword: string) =>
  `Keyword '${keyword}' for nested schema also given as input tensor name`)

export const generateKeywordNotObject = invalid('ERR_SHM_GENERATE_KEYWORD_NOT_OBJECT', (keyword: string) =>
  `Expected JSON object for keyword: '${keyword}': attempt to access JSON non-object as object`)

/** A mistake inside a nested schema's object, in Triton's words for where it was. */
export const generateKeywordInvalid = invalid('ERR_SHM_GENERATE_KEYWORD_INVALID', (keyword: string, message: string) =>
  `Converting keyword: '${keyword}': ${message}`)

/** `generate` on a (decoupled) model that sent no response, or more than one. */
export const generateResponseCount = answered('ERR_SHM_GENERATE_RESPONSE_COUNT', 'internal', () =>
  'generate expects model to produce exactly 1 response, use generate stream for model that generates various number of responses')

export const streamShuttingDown = answered('ERR_SHM_STREAM_SHUTTING_DOWN', 'unavailable', () =>
  'GRPC server is shutting down and has stopped accepting new requests.')

// The shared registry (sharedRegistry option)

const STORE_FAILED = answered('ERR_SHM_STORE_FAILED', 'internal', () => 'the shared memory registry is unavailable, try again')

/** The store failed (busy beyond its timeout, corrupt, removed): nothing was changed. The cause,
 * which may name the file, is kept for the server's log and never sent. */
export const storeFailed = (cause: unknown) => Object.assign(STORE_FAILED(), { cause })

// The host's mistakes (kind `usage`): thrown at startup, or to the host's own call

/** `owner` names what was given the options (`fastify-triton-shm`, `fastify-triton-shm models`, ...). */
export const invalidOption = usage('ERR_SHM_INVALID_OPTION', (owner: string, problem: string) => `${owner}: ${problem}`)

/** A restriction naming a category Triton does not have (its `--http-restricted-api` text; "protocol" over gRPC). */
export const unknownRestrictedCategory = usage('ERR_SHM_UNKNOWN_RESTRICTED_CATEGORY', (owner: string, feature: 'api' | 'protocol', category: string) =>
  `${owner}: unknown restricted ${feature} '${category}'`)

/** A category in two restriction groups: which header would it take? (Triton's text.) */
export const repeatedRestrictedCategory = usage('ERR_SHM_REPEATED_RESTRICTED_CATEGORY', (owner: string, feature: 'api' | 'protocol', category: string) =>
  `${owner}: restricted ${feature} '${category}' can not be specified in multiple config groups`)

export const invalidModelDeclaration = usage('ERR_SHM_INVALID_MODEL_DECLARATION', (model: string | undefined, problem: string) =>
  `fastify-triton-shm: model${model === undefined ? '' : ` '${model}'`}: ${problem}`)

export const tooManySharedModelVersions = usage('ERR_SHM_TOO_MANY_SHARED_MODEL_VERSIONS', (most: number, model: string, version: string) =>
  `fastify-triton-shm: the statistics of a shared registry hold at most ${most} model versions: model '${model}' version ${version} is one more`)

export const modelTableShared = usage('ERR_SHM_MODEL_TABLE_SHARED', () =>
  'fastify-triton-shm: a model table is served with one registry: this one serves another already')

export const modelVersionDeclaredTwice = usage('ERR_SHM_MODEL_VERSION_DECLARED_TWICE', (model: string, version: string) =>
  `fastify-triton-shm: model '${model}' version ${version} is declared twice`)

export const noRegistry = usage('ERR_SHM_NO_REGISTRY', (owner: string, decorator: string) =>
  `${owner}: no registry at '${decorator}': register fastify-triton-shm first (option 'decorator')`)

export const noSuchInput = usage('ERR_SHM_NO_SUCH_INPUT', (model: string, input: string) => `the request for model '${model}' has no input '${input}'`)

export const noSuchOutput = usage('ERR_SHM_NO_SUCH_OUTPUT', (model: string, output: string) => `model '${model}' has no output '${output}'`)

export const outputNotProduced = usage('ERR_SHM_OUTPUT_NOT_PRODUCED', (output: string) => `the model did not produce output '${output}'`)

export const notDecoupled = usage('ERR_SHM_NOT_DECOUPLED', (model: string) =>
  `model '${model}' is not decoupled: its run fills the outputs of its one response, and infer.send() is for decoupled models`)

export const responseAfterFinal = usage('ERR_SHM_RESPONSE_AFTER_FINAL', (model: string) =>
  `model '${model}' sent a response after its final one, or after its run ended`)

export const notATensor = usage('ERR_SHM_ONNX_NOT_A_TENSOR', (value: string) =>
  `graph value '${value}' is not a tensor: only tensors can be served`)

export const noKServeDatatype = usage('ERR_SHM_ONNX_NO_DATATYPE', (value: string, type: string) =>
  `graph tensor '${value}' has type ${type}, which KServe has no datatype for`)

export const grpcSocketPathTooLong = usage('ERR_SHM_GRPC_SOCKET_PATH_TOO_LONG', (socketPath: string, most: number) =>
  `fastify-triton-shm: option 'grpc.path' '${socketPath}' is longer than the ${most} bytes a socket's path may hold`)

// The environment (kind `setup`): a feature that cannot start here; the first argument is the cause

export const missingPeerDependency = setup('ERR_SHM_MISSING_PEER_DEPENDENCY', (feature: string, name: string) =>
  `${feature} needs the package '${name}': npm install ${name}`)

export const unusablePeerDependency = setup('ERR_SHM_UNUSABLE_PEER_DEPENDENCY', (feature: string, name: string, message: string) =>
  `${feature} could not load the package '${name}': ${message}`)

export const storeOpenFailed = setup('ERR_SHM_STORE_OPEN_FAILED', (path: string, message: string) =>
  `fastify-triton-shm: cannot open the shared registry store '${path}': ${message}`)

/** A Unix domain socket's path holds at most 107 bytes: the store's path must leave room for its
 * processes' sockets beside it. */
export const channelPathTooLong = setup('ERR_SHM_CHANNEL_PATH_TOO_LONG', (socketPath: string, most: number) =>
  'fastify-triton-shm: the processes of a service that shares a registry and serves models call one another on ' +
  `sockets beside the store, and '${socketPath}' is longer than the ${most} bytes a socket's path may hold: ` +
  'give sharedRegistry a shorter path')

/** The gRPC listener's socket path is taken: by a server listening there, or by a file left behind
 * (a socket of a server that stopped without closing it). Never removed here: it may be another's. */
export const grpcSocketPathTaken = setup('ERR_SHM_GRPC_SOCKET_PATH_TAKEN', (socketPath: string) =>
  `fastify-triton-shm: cannot listen for gRPC on '${socketPath}': a file is there already ` +
  '(a server listening on it, or a socket left by one that stopped without closing): remove it if no server uses it')

export const onnxRuntimeLoadFailed = setup('ERR_SHM_ONNX_RUNTIME_LOAD_FAILED', (library: string, message: string) =>
  `fastify-triton-shm/onnxruntime could not load ONNX Runtime from ${library}: ${message}`)

export const onnxRuntimeTooOld = setup('ERR_SHM_ONNX_RUNTIME_TOO_OLD', (library: string, needed: string, found: string) =>
  `fastify-triton-shm/onnxruntime needs ONNX Runtime ${needed} or newer; ${library} is ${found}`)

// The addon's low-level functions (`PosixShmError`, kind `system`): besides errno names (ENOENT, ...)

/** Codes of `PosixShmError` that are checks of the addon's own, not errno names. */
export const POSIX_SHM_CODES = {
  /** The key names something other than a regular shared memory object. */
  notRegular: declare('ERR_SHM_NOT_REGULAR', 'system'),
  /** Byte size 0, or a range that does not fit in the object (or the mapping). */
  outOfBounds: declare('ERR_SHM_OUT_OF_BOUNDS', 'system'),
  /** More bytes than one ArrayBuffer of this Node can hold. */
  windowTooLarge: declare('ERR_SHM_WINDOW_TOO_LARGE', 'system'),
  /** A window was asked of a mapping that is unmapped already. */
  unmapped: declare('ERR_SHM_UNMAPPED', 'system'),
  /** The peer a mapping was asked for could not itself open the object read-write. */
  peerDenied: declare('ERR_SHM_PEER_DENIED', 'system')
} as const

/** Every code of this package and its kind: what the faces map, and what docs/errors.md lists. */
export const errorCodes: Readonly<Record<string, ErrorKind>> = Object.freeze(table)
