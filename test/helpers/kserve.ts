/**
 * KServe V2 infer requests for tests: a Fastify app with the plugin and an infer route built from
 * the package's helpers (as a host would build one) over small test models, builders for the
 * request's JSON, binary bodies and responses, and client-side mappings of real shared memory.
 */
import { readFileSync } from 'node:fs'
import Fastify, {
  type FastifyInstance, type FastifyReply, type FastifyRequest, type FastifyServerOptions, type LightMyRequestResponse
} from 'fastify'
import type { Test } from 'tap'
import fastifyTritonShm, {
  httpStatusOf, type InferBodyOptions, type InferRequest, inferResponse, readInferRequest, SharedMemoryObject, useInferBodyParser
} from '../../lib/index'
import type { Datatype, InferLimits, InferResponseWire, ModelSignature, TensorData, TensorParameters } from '../../types'
import { register } from './http'
import { objectPath, uniqueKey, unlinkOnTeardown } from './shm'

export interface TestModel {
  signature: ModelSignature
  /** Reads the inputs and fills the outputs; may be async (a slow model). */
  execute(infer: InferRequest): void | Promise<void>
}

export interface InferAppOptions {
  /** Leave Fastify's own JSON parser in place instead of `useInferBodyParser` (JSON bodies only). */
  fastifyJsonParser?: boolean
  /** Options of `useInferBodyParser`. */
  bodyParser?: InferBodyOptions
  /** Runs in the handler before the infer request is read (a host's auth, a queue...). */
  beforeRead?: (request: FastifyRequest, reply: FastifyReply) => Promise<void>
  /** What one request may cost (`readInferRequest`'s `limits`). */
  limits?: InferLimits
  /** Options of the Fastify server itself. */
  server?: FastifyServerOptions
}

export interface InferApp {
  app: FastifyInstance
  /** Every infer request the route read, in order: the tensors the models were given. */
  seen: InferRequest[]
}

/**
 * An app with the plugin and `POST /v2/models/<model>/infer` for `models`, errors answered as
 * `{"error"}` with their status (500 keeps its message here, so tests can read it). Closed on teardown.
 */
export async function buildInferApp (t: Test, models: TestModel[], options: InferAppOptions = {}): Promise<InferApp> {
  const app = Fastify(options.server)
  t.teardown(() => app.close())
  app.setErrorHandler((error: Error, _request, reply) => reply.code(httpStatusOf(error) ?? 500).send({ error: error.message }))
  await app.register(fastifyTritonShm)
  const byName = new Map(models.map((model) => [model.signature.name, model]))
  const seen: InferRequest[] = []
  await app.register(async (inference) => {
    if (options.fastifyJsonParser !== true) useInferBodyParser(inference, options.bodyParser)
    inference.post<{ Params: { model: string } }>('/v2/models/:model/infer', async (request, reply) => {
      const model = byName.get(request.params.model)
      if (model === undefined) return reply.code(404).send({ error: `unknown model '${request.params.model}'` })
      await options.beforeRead?.(request, reply)
      const infer = readInferRequest(request, reply, { registry: app.systemSharedMemory, model: model.signature, limits: options.limits })
      seen.push(infer)
      await model.execute(infer)
      return inferResponse(infer, reply)
    })
  })
  await app.ready()
  return { app, seen }
}

/** Copies every element of `from` into `to` (same datatype and element count). */
function copyTensor (from: TensorData, to: TensorData): void {
  if (Array.isArray(to)) [...from as Iterable<Buffer>].forEach((element, index) => { to[index] = element })
  else (to as Uint8Array).set(from as Uint8Array)
}

/**
 * A model `name` with one input `IN_<DATATYPE>` and one output `OUT_<DATATYPE>` per datatype, each of
 * shape `shape`; it copies every input to its output, with the input's shape.
 */
export function echoModel (name: string, datatypes: Datatype[], shape: number[] = [-1]): TestModel {
  const signature: ModelSignature = {
    name,
    inputs: datatypes.map((datatype) => ({ name: `IN_${datatype}`, datatype, shape })),
    outputs: datatypes.map((datatype) => ({ name: `OUT_${datatype}`, datatype, shape }))
  }
  return {
    signature,
    execute (infer) {
      for (const datatype of datatypes) {
        const input = infer.input(`IN_${datatype}`)
        copyTensor(input.data, infer.output(`OUT_${datatype}`, input.shape))
      }
    }
  }
}

/** Triton's `simple` signature (INT32 [-1, 16] INPUT0, INPUT1 -> OUTPUT0 = sum, OUTPUT1 = difference). */
/** `sumModel` named `name` that, once a request reaches it, waits for `release()`: a run in flight
 * a test holds; `reached` resolves when the first one arrives. */
export function heldSum (name = 'slow'): { model: TestModel, reached: Promise<void>, release: () => void } {
  let arrived = () => {}
  const reached = new Promise<void>((resolve) => { arrived = resolve })
  let release = () => {}
  const released = new Promise<void>((resolve) => { release = resolve })
  const model: TestModel = {
    signature: { ...sumModel().signature, name },
    async execute (infer) {
      arrived()
      await released
      return sumModel().execute(infer)
    }
  }
  return { model, reached, release }
}

export function sumModel (name = 'simple', datatype: 'INT32' | 'FP32' | 'FP64' | 'INT64' = 'INT32', shape = [-1, 16]): TestModel {
  const pair = (prefix: string) => [0, 1].map((index) => ({ name: `${prefix}${index}`, datatype, shape }))
  return {
    signature: { name, inputs: pair('INPUT'), outputs: pair('OUTPUT') },
    execute (infer) {
      const { data: a, shape } = infer.input<Int32Array>('INPUT0')
      const { data: b } = infer.input<Int32Array>('INPUT1')
      const sum = infer.output<Int32Array>('OUTPUT0', shape)
      const difference = infer.output<Int32Array>('OUTPUT1', shape)
      for (let index = 0; index < a.length; index++) {
        sum[index] = a[index] + b[index]
        difference[index] = a[index] - b[index]
      }
    }
  }
}

// The JSON of an infer request

export interface WireInput {
  name: string
  datatype: string
  shape: number[]
  parameters?: TensorParameters
  data?: unknown[]
}

export const sharedMemoryParameters = (region: string, byteSize: number, offset?: number): TensorParameters => ({
  shared_memory_region: region,
  ...(offset === undefined ? {} : { shared_memory_offset: offset }),
  shared_memory_byte_size: byteSize
})

export const jsonInput = (name: string, datatype: string, shape: number[], data: unknown[]): WireInput =>
  ({ name, datatype, shape, data })

export const binaryInput = (name: string, datatype: string, shape: number[], byteSize: number): WireInput =>
  ({ name, datatype, shape, parameters: { binary_data_size: byteSize } })

export const shmInput = (name: string, datatype: string, shape: number[], region: string, byteSize: number,
  offset?: number): WireInput => ({ name, datatype, shape, parameters: sharedMemoryParameters(region, byteSize, offset) })

export const shmOutput = (name: string, region: string, byteSize: number, offset?: number,
  extra: TensorParameters = {}) => ({ name, parameters: { ...sharedMemoryParameters(region, byteSize, offset), ...extra } })

// Sending requests

export const inferUrl = (model: string) => `/v2/models/${encodeURIComponent(model)}/infer`

/** POSTs a JSON infer request; `body` may be text already (to send numbers JSON.stringify cannot). */
export function infer (app: FastifyInstance, model: string, body: unknown,
  headers: Record<string, string> = {}): Promise<LightMyRequestResponse> {
  const payload = typeof body === 'string' ? body : JSON.stringify(body)
  return app.inject({ method: 'POST', url: inferUrl(model), payload, headers })
}

/**
 * A body of the binary tensor data extension: the JSON header, then `chunks` back to back, with the
 * `Inference-Header-Content-Length` header (and a Content-Type only if one is given).
 */
export function binaryBody (header: unknown, chunks: Uint8Array[], contentType?: string):
{ payload: Buffer, headers: Record<string, string> } {
  const json = Buffer.from(typeof header === 'string' ? header : JSON.stringify(header))
  const headers: Record<string, string> = { 'inference-header-content-length': String(json.length) }
  if (contentType !== undefined) headers['content-type'] = contentType
  return { payload: Buffer.concat([json, ...chunks.map((chunk) => Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength))]), headers }
}

export function inferBinary (app: FastifyInstance, model: string, header: unknown, chunks: Uint8Array[],
  contentType?: string): Promise<LightMyRequestResponse> {
  const { payload, headers } = binaryBody(header, chunks, contentType)
  return app.inject({ method: 'POST', url: inferUrl(model), payload, headers })
}

export interface ParsedResponse {
  header: InferResponseWire
  /** The JSON header exactly as sent. */
  headerText: string
  /** Each binary output's bytes, by output name. */
  binary: Map<string, Buffer>
}

/** Splits a response by its `Inference-Header-Content-Length` (absent: all JSON). */
export function parseInferResponse (response: LightMyRequestResponse): ParsedResponse {
  const body = response.rawPayload
  const lengthHeader = response.headers['inference-header-content-length']
  const headerLength = lengthHeader === undefined ? body.length : Number(lengthHeader)
  const headerText = body.subarray(0, headerLength).toString()
  const header = JSON.parse(headerText) as InferResponseWire
  const binary = new Map<string, Buffer>()
  let position = headerLength
  for (const output of header.outputs) {
    const size = output.parameters?.binary_data_size
    if (typeof size !== 'number') continue
    binary.set(output.name, body.subarray(position, position + size))
    position += size
  }
  if (position !== body.length) throw new Error(`response has ${body.length - position} bytes nobody declared`)
  return { header, headerText, binary }
}

// Shared memory, from the client's side

export interface MappedObject {
  key: string
  /** The whole object, mapped in this process as a client maps it. */
  bytes: Uint8Array
  /** The object as another program sees it: read straight from its file in /dev/shm. */
  read(): Buffer
}

/** Creates and maps a new object (unique name); it is unmapped and unlinked when the test ends. */
export function makeMappedObject (t: Test, byteSize: number, label?: string): MappedObject {
  const key = uniqueKey(label)
  const object = SharedMemoryObject.create(key, byteSize)
  unlinkOnTeardown(t, key)
  t.teardown(() => { object.close() })
  return { key, bytes: object.bytes, read: () => readFileSync(objectPath(key)) }
}

/** Registers a region over HTTP (as a client does) and asserts it worked. */
export async function registerRegion (t: Test, app: FastifyInstance, name: string, key: string, byteSize: number,
  offset = 0): Promise<void> {
  const response = await register(app, name, key, byteSize, offset)
  t.equal(response.statusCode, 200, `registered ${name} (${response.body})`)
}

/** True once the region has no lease left: an unregister removes it at once. Unregisters it. */
export function unregisterIsImmediate (app: FastifyInstance, name: string): boolean {
  app.systemSharedMemory.unregister(name)
  return !app.systemSharedMemory.has(name)
}

// Bytes

/** The little-endian bytes of `values` as `datatype` (fixed-size datatypes). */
export function bytesOfValues (datatype: Exclude<Datatype, 'BYTES'>, values: Array<number | bigint | boolean>): Buffer {
  const size = ELEMENT_BYTES[datatype]
  const bytes = Buffer.alloc(values.length * size)
  values.forEach((value, index) => WRITE[datatype](bytes, value, index * size))
  return bytes
}

const ELEMENT_BYTES: Record<Exclude<Datatype, 'BYTES'>, number> = {
  BOOL: 1, UINT8: 1, UINT16: 2, UINT32: 4, UINT64: 8, INT8: 1, INT16: 2, INT32: 4, INT64: 8, FP16: 2, BF16: 2, FP32: 4, FP64: 8
}

type Writer = (bytes: Buffer, value: number | bigint | boolean, at: number) => void
const WRITE: Record<Exclude<Datatype, 'BYTES'>, Writer> = {
  BOOL: (bytes, value, at) => bytes.writeUInt8(value === true ? 1 : 0, at),
  UINT8: (bytes, value, at) => bytes.writeUInt8(value as number, at),
  UINT16: (bytes, value, at) => bytes.writeUInt16LE(value as number, at),
  UINT32: (bytes, value, at) => bytes.writeUInt32LE(value as number, at),
  UINT64: (bytes, value, at) => bytes.writeBigUInt64LE(value as bigint, at),
  INT8: (bytes, value, at) => bytes.writeInt8(value as number, at),
  INT16: (bytes, value, at) => bytes.writeInt16LE(value as number, at),
  INT32: (bytes, value, at) => bytes.writeInt32LE(value as number, at),
  INT64: (bytes, value, at) => bytes.writeBigInt64LE(value as bigint, at),
  // Raw 16-bit patterns: JavaScript has no half-precision type.
  FP16: (bytes, value, at) => bytes.writeUInt16LE(value as number, at),
  BF16: (bytes, value, at) => bytes.writeUInt16LE(value as number, at),
  FP32: (bytes, value, at) => bytes.writeFloatLE(value as number, at),
  FP64: (bytes, value, at) => bytes.writeDoubleLE(value as number, at)
}

/** BYTES elements serialized as the wire has them: per element a 4-byte LE length, then the bytes. */
export function serializeStrings (strings: string[]): Buffer {
  return Buffer.concat(strings.flatMap((string) => {
    const bytes = Buffer.from(string)
    const length = Buffer.alloc(4)
    length.writeUInt32LE(bytes.length)
    return [length, bytes]
  }))
}
