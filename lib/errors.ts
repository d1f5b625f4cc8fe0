/**
 * Every error this package answers a client with: Triton's message, word for word where Triton
 * has one (client test suites match them), and the HTTP status. Routes never build messages.
 */

const UINT64_MAX = '18446744073709551615'

/** An error a client caused, with the message and HTTP status to answer it with. */
export class SharedMemoryError extends Error {
  readonly statusCode: number

  constructor (statusCode: number, message: string) {
    super(message)
    this.name = 'SharedMemoryError'
    this.statusCode = statusCode
  }
}

const badRequest = (message: string) => new SharedMemoryError(400, message)

// Registration (SPEC section 2)

export const clientShmDisabled = () => new SharedMemoryError(501,
  "Client shared memory is disabled. Register the plugin with 'allowClientShm: true' to enable.")

export const missingField = (field: string) =>
  badRequest(`Shared memory register request has no '${field}' field`)

export const invalidField = (field: string, expected: string) =>
  badRequest(`Shared memory register request field '${field}' must be ${expected}`)

export const invalidBody = (reason: string) =>
  badRequest(`Shared memory register request is invalid: ${reason}`)

export const missingRegionName = (memory: 'system' | 'cuda' = 'system') =>
  badRequest(`'region name' is necessary to register ${memory} shared memory region`)

export const invalidKey = (name: string, key: string) =>
  badRequest(`cannot register shared memory region '${name}' - invalid shm key '${key}'`)

export const reservedKey = (name: string, key: string, prefix: string) =>
  badRequest(`cannot register shared memory region '${name}' with key '${key}' ` +
    `as the key contains the reserved prefix '${prefix}'`)

export const duplicateRegion = (name: string) =>
  badRequest(`shared memory region '${name}' already in manager`)

export const unableToOpen = (key: string) =>
  badRequest(`Unable to open shared memory region: '${key}'`)

export const invalidRegisterArgs = (name: string) =>
  badRequest(`failed to register shared memory region '${name}': invalid args`)

export const tooManyRegions = (name: string, maxRegions: number) =>
  badRequest(`cannot register shared memory region '${name}': ` +
    `the server allows at most ${maxRegions} registered regions`)

export const regionTooLarge = (name: string, byteSize: number, maxRegionBytes: number) =>
  badRequest(`cannot register shared memory region '${name}': byte_size ${byteSize} ` +
    `exceeds the server's limit of ${maxRegionBytes} bytes per region`)

export const totalTooLarge = (name: string, byteSize: number, maxTotalBytes: number) =>
  badRequest(`cannot register shared memory region '${name}': mapping ${byteSize} more bytes ` +
    `would exceed the server's limit of ${maxTotalBytes} bytes in total`)

export const cudaNotSupported = (name: string) =>
  badRequest(`failed to register CUDA shared memory region: '${name}', GPUs not supported`)

// Status

export const regionStatusNotFound = (name: string) =>
  new SharedMemoryError(404, `Unable to find system shared memory region: '${name}'`)

export const cudaRegionStatusNotFound = (name: string) =>
  new SharedMemoryError(404, `Unable to find cuda shared memory region: '${name}'`)

// Use by inference requests (SPEC section 4)

export const regionNotFound = (name: string) =>
  new SharedMemoryError(404, `Unable to find shared memory region: '${name}'`)

export const regionTruncated = (name: string) =>
  badRequest(`shared memory region '${name}' is no longer usable: its object was truncated below the region. ` +
    'Unregister it, and register it again once the object is restored')

export const invalidOffset = (name: string) =>
  badRequest(`Invalid offset for shared memory region: '${name}'`)

export const offsetOverflow = (name: string, byteSize: bigint, offset: bigint) =>
  badRequest(`Integer overflow detected: byte_size (${byteSize}) + offset (${offset}) ` +
    `exceeds maximum value (${UINT64_MAX}) for region '${name}'`)

export const invalidRange = (name: string) =>
  badRequest(`Invalid offset + byte size for shared memory region: '${name}'`)

export const invalidUseArgs = (name: string) =>
  badRequest(`shared memory offset and byte size for region '${name}' must be unsigned integers`)

// HTTP

export const restrictedApi = (header: string) =>
  new SharedMemoryError(403, `This API is restricted, expecting header '${header}'`)

export const methodNotAllowed = () => new SharedMemoryError(405, 'Method Not Allowed')

export const routeNotFound = () => new SharedMemoryError(404, 'Not Found')

// Inference requests (KServe V2, SPEC section 4)

const tensorFields = (fields: string[]) => fields.map((field) => `'${field}'`).join(' ')

export const inputSourceCount = (setFields: string[]) =>
  badRequest("Input must set only one of the following fields: 'data', 'binary_data_size' in 'parameters', " +
    `'shared_memory_region' in 'parameters'. But ${setFields.length === 0 ? 'no field is set' : `set ${tensorFields(setFields)}`}`)

export const inputByteSizeMismatch = (input: string, model: string, expected: number, received: number) =>
  badRequest(`input byte size mismatch for input '${input}' for model '${model}'. Expected ${expected}, got ${received}`)

export const inputElementCountMismatch = (input: string, model: string, expected: number, received: number) =>
  badRequest(`unexpected number of elements in 'data' for input '${input}' for model '${model}'. ` +
    `Expected ${expected}, got ${received}`)

export const invalidInputData = (input: string, datatype: string, expected: string) =>
  badRequest(`'data' of input '${input}' holds a value that is not ${expected}, as ${datatype} requires`)

export const datatypeNotJson = (input: string, datatype: string) =>
  badRequest(`input '${input}' has datatype ${datatype}, which cannot be sent as JSON 'data': ` +
    'use the binary data extension or shared memory')

export const outputBinaryAndSharedMemory = () =>
  badRequest("Output can't set both 'shared_memory_region' and 'binary_data'")

export const outputTooSmall = (output: string, byteSize: number, required: number) =>
  badRequest(`shared memory size specified with the request for output '${output}' (${byteSize} bytes) ` +
    `should be at least ${required} bytes to hold the results`)

export const missingSharedMemoryByteSize = (tensor: string) =>
  badRequest(`'shared_memory_byte_size' must be set with 'shared_memory_region' for tensor '${tensor}'`)

export const invalidTensorParameter = (tensor: string, parameter: string, expected: string) =>
  badRequest(`parameter '${parameter}' of tensor '${tensor}' must be ${expected}`)

export const inputCountMismatch = (model: string, expected: number, received: number) =>
  badRequest(`expected ${expected} inputs but got ${received} inputs for model '${model}'`)

export const duplicateInput = (input: string) =>
  badRequest(`input '${input}' already exists in request`)

export const unexpectedInput = (input: string, model: string) =>
  badRequest(`unexpected inference input '${input}' for model '${model}'`)

export const unexpectedOutput = (output: string, model: string) =>
  badRequest(`unexpected inference output '${output}' for model '${model}'`)

export const inputDatatypeMismatch = (received: string, expected: string, model: string) =>
  badRequest(`inference input data-type is '${received}', model expects '${expected}' for '${model}'`)

export const inputShapeMismatch = (input: string, model: string, expected: number[], received: number[]) =>
  badRequest(`unexpected shape for input '${input}' for model '${model}'. ` +
    `Expected [${expected.join(',')}], got [${received.join(',')}]`)

export const malformedBytesTensor = (tensor: string) =>
  badRequest(`BYTES data of tensor '${tensor}' is malformed: each element must be a 4-byte little-endian length ` +
    'followed by that many bytes, filling the tensor exactly')

/** 499: nginx's "client closed request", logged like any client error and never sent. */
export const clientClosedRequest = () => new SharedMemoryError(499, 'the client closed the request')

export const invalidInferRequest = (reason: string) =>
  badRequest(`Unable to parse inference request: ${reason}`)
