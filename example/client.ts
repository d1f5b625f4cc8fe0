/**
 * The flow of Triton's `simple_http_shm_client` example, in Node: inputs and outputs of `simple`
 * (INT32, an ONNX graph run by ONNX Runtime) and `simple_string` (BYTES) live in shared memory;
 * no tensor byte crosses the socket. Then an image through `tiny_classifier` (ONNX), checked
 * against the network computed in JavaScript.
 *
 * With a gRPC address, the same flows run again over gRPC (GRPCInferenceService), on the same
 * registry.
 *
 *   npm run example:client -- http://127.0.0.1:8000 127.0.0.1:8001
 */
import { randomBytes } from 'node:crypto'
import { GrpcKServeClient } from '../lib/grpc'
import { KServeClient, SharedMemoryObject, readBytesElements, serializedSize, writeBytesTensor } from '../lib/index'
import { classify, testImage } from './onnx/classifier-reference'

const ELEMENTS = 16
const TENSOR_BYTES = ELEMENTS * 4

export interface ClientRun {
  /** Lines of a readable transcript. */
  transcript: string[]
  /** Every result checked correct. */
  ok: boolean
}

export interface ClientOptions {
  /** Appended to the object names, so runs in parallel do not meet. Default none, as in Triton's example. */
  keySuffix?: string
  /** Headers sent with every request: `{ connection: 'close' }` makes each call on a new connection,
   * as Triton's clients do when they make a client per call, or one connection per request in flight. */
  headers?: Record<string, string>
  log?: (line: string) => void
  /** The service's gRPC listener (`host:port`, or `unix:///path` for its GRPC_SOCKET): the flows run over gRPC too. */
  grpcAddress?: string
  /** The service's HTTP_SOCKET: HTTP requests go there (`baseUrl` gives their path, e.g. `http://localhost`). */
  socketPath?: string
}

/** What the flows call: the HTTP client, or its gRPC face. */
type ShmClient = Pick<KServeClient, 'registerSystemSharedMemory' | 'unregisterSystemSharedMemory' | 'unregisterCudaSharedMemory' |
'systemSharedMemoryStatus' | 'infer'>

const shmInput = (name: string, datatype: string, region: string, offset: number, byteSize: number) => ({
  name,
  datatype,
  shape: [1, ELEMENTS],
  parameters: { shared_memory_region: region, shared_memory_offset: offset, shared_memory_byte_size: byteSize }
})

const shmOutput = (name: string, region: string, offset: number, byteSize: number) => ({
  name,
  parameters: { shared_memory_region: region, shared_memory_offset: offset, shared_memory_byte_size: byteSize }
})

/** INPUT0 and INPUT1 one after the other in `inputRegion`; OUTPUT0 and OUTPUT1 in parts of
 * `outputPartBytes` of `outputRegion`: the layout of Triton's shared memory examples. */
const shmRequest = (datatype: string, inputRegion: string, [size0, size1]: [number, number],
  outputRegion: string, outputPartBytes: number) => ({
  inputs: [shmInput('INPUT0', datatype, inputRegion, 0, size0), shmInput('INPUT1', datatype, inputRegion, size0, size1)],
  outputs: [
    shmOutput('OUTPUT0', outputRegion, 0, outputPartBytes),
    shmOutput('OUTPUT1', outputRegion, outputPartBytes, outputPartBytes)
  ]
})

/** Creates an object, removing a stale one left by an earlier run that was killed. */
function createFresh (key: string, byteSize: number): SharedMemoryObject {
  try {
    SharedMemoryObject.open(key, 1).destroy()
  } catch {}
  return SharedMemoryObject.create(key, byteSize)
}

class Transcript {
  readonly lines: string[] = []
  ok = true

  constructor (private readonly log: (line: string) => void) {}

  say (line: string) {
    this.lines.push(line)
    this.log(line)
  }

  check (what: string, expected: unknown[], actual: unknown[]) {
    this.record(what, JSON.stringify(expected) === JSON.stringify(actual), JSON.stringify(actual))
  }

  /** Checks numbers that a different order of float operations may change in their last digits. */
  checkClose (what: string, expected: ArrayLike<number>, actual: ArrayLike<number>, tolerance: number) {
    const worst = Math.max(...Array.from(actual, (value, index) => Math.abs(value - expected[index])))
    this.record(what, actual.length === expected.length && worst <= tolerance, `[${Array.from(actual, (value) => value.toFixed(4)).join(', ')}]`)
  }

  record (what: string, correct: boolean, actual: string) {
    this.ok &&= correct
    this.say(`${correct ? 'ok  ' : 'FAIL'} ${what}: ${actual}`)
  }

  async time<T> (what: string, action: () => Promise<T>): Promise<T> {
    const start = process.hrtime.bigint()
    const result = await action()
    this.say(`${what} (${(Number(process.hrtime.bigint() - start) / 1e6).toFixed(2)} ms)`)
    return result
  }
}

async function runSimple (client: ShmClient, transcript: Transcript, suffix: string) {
  const input = createFresh(`/input_simple${suffix}`, 2 * TENSOR_BYTES)
  const output = createFresh(`/output_simple${suffix}`, 2 * TENSOR_BYTES)
  try {
    const input0 = Array.from({ length: ELEMENTS }, (_, index) => index)
    const input1 = Array.from({ length: ELEMENTS }, () => 1)
    new Int32Array(input.bytes.buffer, 0, ELEMENTS).set(input0)
    new Int32Array(input.bytes.buffer, TENSOR_BYTES, ELEMENTS).set(input1)
    transcript.say(`created ${input.key} and ${output.key} (${input.byteSize} bytes each); wrote INPUT0 = 0..15 at 0, INPUT1 = 1s at ${TENSOR_BYTES}`)
    await client.registerSystemSharedMemory(`output_data${suffix}`, output.key, output.byteSize)
    await client.registerSystemSharedMemory(`input_data${suffix}`, input.key, input.byteSize)
    transcript.say(`registered output_data${suffix} and input_data${suffix}`)
    const response = await transcript.time('infer simple, inputs and outputs in shared memory', () => client.infer('simple',
      shmRequest('INT32', `input_data${suffix}`, [TENSOR_BYTES, TENSOR_BYTES], `output_data${suffix}`, TENSOR_BYTES)))
    transcript.say(`response: ${JSON.stringify(response)}`)
    transcript.check('OUTPUT0 = INPUT0 + INPUT1', input0.map((value, index) => value + input1[index]),
      Array.from(new Int32Array(output.bytes.buffer, 0, ELEMENTS)))
    transcript.check('OUTPUT1 = INPUT0 - INPUT1', input0.map((value, index) => value - input1[index]),
      Array.from(new Int32Array(output.bytes.buffer, TENSOR_BYTES, ELEMENTS)))
    transcript.say(`status: ${JSON.stringify(await client.systemSharedMemoryStatus())}`)
    await client.unregisterSystemSharedMemory(`input_data${suffix}`)
    await client.unregisterSystemSharedMemory(`output_data${suffix}`)
    transcript.say(`unregistered; status: ${JSON.stringify(await client.systemSharedMemoryStatus())}`)
  } finally {
    input.destroy()
    output.destroy()
  }
}

async function runSimpleString (client: ShmClient, transcript: Transcript, suffix: string) {
  const strings0 = Array.from({ length: ELEMENTS }, (_, index) => Buffer.from(String(index)))
  const strings1 = Array.from({ length: ELEMENTS }, () => Buffer.from('1'))
  const [size0, size1] = [serializedSize(strings0), serializedSize(strings1)]
  const outputBytes = 256 // room for 16 numbers of up to 12 characters each, per output
  const input = createFresh(`/input_simple_string${suffix}`, size0 + size1)
  const output = createFresh(`/output_simple_string${suffix}`, 2 * outputBytes)
  try {
    writeBytesTensor(strings0, input.bytes.subarray(0, size0))
    writeBytesTensor(strings1, input.bytes.subarray(size0))
    await client.registerSystemSharedMemory(`input_strings${suffix}`, input.key, input.byteSize)
    await client.registerSystemSharedMemory(`output_strings${suffix}`, output.key, output.byteSize)
    transcript.say(`registered input_strings${suffix} (${input.byteSize} bytes of length-prefixed strings) and output_strings${suffix}`)
    const response = await transcript.time('infer simple_string, BYTES in shared memory', () => client.infer('simple_string',
      shmRequest('BYTES', `input_strings${suffix}`, [size0, size1], `output_strings${suffix}`, outputBytes)))
    transcript.say(`response: ${JSON.stringify(response)}`)
    // The server wrote each result at the start of its part; the rest of the part is spare room.
    const read = (offset: number, byteSize: number) => [...readBytesElements('OUTPUT', output.bytes.subarray(offset, offset + byteSize), ELEMENTS)]
      .map<string>(String)
    transcript.check('OUTPUT0 = INPUT0 + INPUT1', strings0.map((_, index) => String(index + 1)), read(0, outputBytes))
    transcript.check('OUTPUT1 = INPUT0 - INPUT1', strings0.map((_, index) => String(index - 1)), read(outputBytes, outputBytes))
    await client.unregisterSystemSharedMemory()
    transcript.say('unregistered all')
  } finally {
    input.destroy()
    output.destroy()
  }
}

async function runClassifier (client: ShmClient, transcript: Transcript, suffix: string) {
  const image = testImage()
  const classes = 10
  const region = createFresh(`/image${suffix}`, image.byteLength + classes * 4)
  try {
    new Float32Array(region.bytes.buffer, 0, image.length).set(image)
    await client.registerSystemSharedMemory(`image${suffix}`, region.key, region.byteSize)
    transcript.say(`registered image${suffix}: a 3 x 224 x 224 FP32 image (${image.byteLength} bytes) and room for ${classes} probabilities`)
    const response = await transcript.time('infer tiny_classifier, image and probabilities in shared memory', () => client.infer('tiny_classifier', {
      inputs: [{ name: 'image', datatype: 'FP32', shape: [1, 3, 224, 224], parameters: { shared_memory_region: `image${suffix}`, shared_memory_byte_size: image.byteLength } }],
      outputs: [shmOutput('probabilities', `image${suffix}`, image.byteLength, classes * 4)]
    }))
    transcript.say(`response: ${JSON.stringify(response)}`)
    transcript.checkClose('probabilities = the network computed in JavaScript', classify(image),
      new Float32Array(region.bytes.buffer, image.byteLength, classes), 1e-5)
    await client.unregisterSystemSharedMemory(`image${suffix}`)
  } finally {
    region.destroy()
  }
}

/** Runs every flow against the server at `baseUrl`. */
export async function runClient (baseUrl: string, options: ClientOptions = {}): Promise<ClientRun> {
  const transcript = new Transcript(options.log ?? (() => {}))
  const suffix = options.keySuffix ?? ''
  await runFlows(new KServeClient(baseUrl, { headers: options.headers, socketPath: options.socketPath }), transcript, suffix)
  if (options.grpcAddress !== undefined) {
    const grpc = new GrpcKServeClient(options.grpcAddress)
    try {
      transcript.say(`\nthe same flows over gRPC at ${options.grpcAddress}`)
      await runFlows(grpc, transcript, suffix)
    } finally {
      grpc.close()
    }
  }
  return { transcript: transcript.lines, ok: transcript.ok }
}

async function runFlows (client: ShmClient, transcript: Transcript, suffix: string) {
  await client.unregisterSystemSharedMemory()
  await client.unregisterCudaSharedMemory()
  transcript.say('unregistered all system and CUDA shared memory regions')
  await runSimple(client, transcript, suffix)
  await runSimpleString(client, transcript, suffix)
  await runClassifier(client, transcript, suffix)
}

if (require.main === module) {
  const baseUrl = process.argv[2] ?? 'http://127.0.0.1:8000'
  runClient(baseUrl, { log: console.log, keySuffix: process.env.KEY_SUFFIX ?? '', grpcAddress: process.argv[3], socketPath: process.env.HTTP_SOCKET })
    .then(({ ok }) => {
      console.log(ok ? 'PASS: every result checked correct' : 'FAIL: some results were wrong')
      process.exit(ok ? 0 : 1)
    }, (error) => {
      console.error(error)
      process.exit(1)
    })
}

export const randomSuffix = () => `_${randomBytes(4).toString('hex')}`
