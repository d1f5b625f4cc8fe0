/**
 * One add_sub_fp32 inference request per transport, ready to send many times: its inputs (random
 * FP32 values), the request bytes, a check of one response against the expected sums and
 * differences, and its teardown. Transports:
 *   shm     inputs and outputs in registered shared memory regions (the request is a few hundred bytes)
 *   binary  binary tensor data extension: raw inputs after the JSON header, binary outputs
 *   json    inputs as JSON `data`, outputs as JSON `data`
 */
import { randomBytes } from 'node:crypto'
import { KServeClient, type SharedMemoryObject } from '../lib/index'
import type { InferRequestWire } from '../types'
import type { LoadRequest } from './load'
import { makeObject, removeObject } from './shm-objects'

export type Transport = 'shm' | 'binary' | 'json'
export const TRANSPORTS: Transport[] = ['shm', 'binary', 'json']

export const MODEL = 'add_sub_fp32'
const INFER_PATH = `/v2/models/${MODEL}/infer`

export interface InferFixture {
  transport: Transport
  /** Bytes of each of the four tensors (INPUT0, INPUT1, OUTPUT0, OUTPUT1). */
  tensorBytes: number
  request: LoadRequest
  /** Sends the request once and checks every output element; throws on any difference. */
  verify(): Promise<void>
  dispose(): Promise<void>
}

interface Inputs { input0: Float32Array, input1: Float32Array }

function randomInputs (elements: number): Inputs {
  const input0 = new Float32Array(elements)
  const input1 = new Float32Array(elements)
  for (let index = 0; index < elements; index++) {
    input0[index] = Math.random()
    input1[index] = Math.random()
  }
  return { input0, input1 }
}

function checkOutputs ({ input0, input1 }: Inputs, sum: ArrayLike<number>, difference: ArrayLike<number>, transport: Transport): void {
  if (sum.length !== input0.length || difference.length !== input0.length) {
    throw new Error(`${transport}: outputs have ${sum.length} and ${difference.length} elements, expected ${input0.length}`)
  }
  for (let index = 0; index < input0.length; index++) {
    if (Math.fround(sum[index]) !== Math.fround(input0[index] + input1[index]) ||
        Math.fround(difference[index]) !== Math.fround(input0[index] - input1[index])) {
      throw new Error(`${transport}: wrong output at element ${index}`)
    }
  }
}

async function post (url: string, request: LoadRequest): Promise<Response> {
  const body = typeof request.body === 'string' ? request.body : new Uint8Array(request.body as Buffer)
  const response = await fetch(url + request.path, { method: 'POST', headers: request.headers, body })
  if (!response.ok) throw new Error(`POST ${request.path}: ${response.status} ${await response.text()}`)
  return response
}

const inputSpecs = (elements: number) => ['INPUT0', 'INPUT1'].map((name) => ({ name, datatype: 'FP32' as const, shape: [elements] }))

function sharedMemoryFixture (url: string, tensorBytes: number, inputs: Inputs): InferFixture & { setup(): Promise<void> } {
  const client = new KServeClient(url)
  const tag = randomBytes(4).toString('hex')
  const inputRegion = `bench_input_${tag}`
  const outputRegion = `bench_output_${tag}`
  let inputObject: SharedMemoryObject | undefined
  let outputObject: SharedMemoryObject | undefined
  const at = (region: string, index: number) => ({
    shared_memory_region: region, shared_memory_offset: index * tensorBytes, shared_memory_byte_size: tensorBytes
  })
  const wire: InferRequestWire = {
    inputs: inputSpecs(tensorBytes / 4).map((input, index) => ({ ...input, parameters: at(inputRegion, index) })),
    outputs: ['OUTPUT0', 'OUTPUT1'].map((name, index) => ({ name, parameters: at(outputRegion, index) }))
  }
  const request: LoadRequest = {
    method: 'POST', path: INFER_PATH, headers: { 'content-type': 'application/json' }, body: JSON.stringify(wire), kind: 'shm'
  }
  return {
    transport: 'shm',
    tensorBytes,
    request,
    async setup () {
      inputObject = makeObject('infer_in', 2 * tensorBytes)
      outputObject = makeObject('infer_out', 2 * tensorBytes)
      const floats = new Float32Array(inputObject.bytes.buffer, 0, tensorBytes / 2)
      floats.set(inputs.input0, 0)
      floats.set(inputs.input1, inputs.input0.length)
      // Touch every output page once, as a client that reuses its output region has.
      outputObject.bytes.fill(0xff)
      await client.registerSystemSharedMemory(inputRegion, inputObject.key, inputObject.byteSize)
      await client.registerSystemSharedMemory(outputRegion, outputObject.key, outputObject.byteSize)
    },
    async verify () {
      const output = outputObject as SharedMemoryObject
      output.bytes.fill(0xff)
      await (await post(url, request)).arrayBuffer()
      const elements = tensorBytes / 4
      checkOutputs(inputs, new Float32Array(output.bytes.buffer, 0, elements),
        new Float32Array(output.bytes.buffer, tensorBytes, elements), 'shm')
    },
    async dispose () {
      await client.unregisterSystemSharedMemory(inputRegion).catch(() => {})
      await client.unregisterSystemSharedMemory(outputRegion).catch(() => {})
      if (inputObject !== undefined) removeObject(inputObject)
      if (outputObject !== undefined) removeObject(outputObject)
    }
  }
}

function binaryFixture (url: string, tensorBytes: number, inputs: Inputs): InferFixture {
  const wire: InferRequestWire = {
    inputs: inputSpecs(tensorBytes / 4).map((input) => ({ ...input, parameters: { binary_data_size: tensorBytes } })),
    outputs: ['OUTPUT0', 'OUTPUT1'].map((name) => ({ name, parameters: { binary_data: true } }))
  }
  // Padded with JSON whitespace so the tensors after it start 8-byte aligned in the body, as a
  // careful client does: the server then views them in place. (Unaligned FP32 inputs are copied
  // first, and were read from the wrong place before typedArrayOver stopped using Buffer#slice.)
  const json = JSON.stringify(wire)
  const header = Buffer.from(json.padEnd(Math.ceil(json.length / 8) * 8, ' '))
  const bytesOf = (array: Float32Array) => Buffer.from(array.buffer, array.byteOffset, array.byteLength)
  const request: LoadRequest = {
    method: 'POST',
    path: INFER_PATH,
    headers: { 'content-type': 'application/octet-stream', 'inference-header-content-length': String(header.length) },
    body: Buffer.concat([header, bytesOf(inputs.input0), bytesOf(inputs.input1)]),
    kind: 'binary'
  }
  return {
    transport: 'binary',
    tensorBytes,
    request,
    async verify () {
      const response = await post(url, request)
      const headerLength = Number(response.headers.get('inference-header-content-length'))
      const body = Buffer.from(await response.arrayBuffer())
      const head = JSON.parse(body.subarray(0, headerLength).toString()) as { outputs: Array<{ name: string, parameters?: { binary_data_size?: number } }> }
      const names = head.outputs.map((output) => output.name).join(',')
      if (names !== 'OUTPUT0,OUTPUT1' || head.outputs.some((output) => output.parameters?.binary_data_size !== tensorBytes)) {
        throw new Error(`binary: unexpected response header ${body.subarray(0, Math.min(headerLength, 300)).toString()}`)
      }
      const data = body.subarray(headerLength)
      if (data.length !== 2 * tensorBytes) throw new Error(`binary: ${data.length} bytes of output data, expected ${2 * tensorBytes}`)
      const floats = new Float32Array(data.buffer.slice(data.byteOffset, data.byteOffset + data.length))
      checkOutputs(inputs, floats.subarray(0, tensorBytes / 4), floats.subarray(tensorBytes / 4), 'binary')
    },
    async dispose () {}
  }
}

function jsonFixture (url: string, tensorBytes: number, inputs: Inputs): InferFixture {
  const data = [inputs.input0, inputs.input1]
  const wire: InferRequestWire = {
    inputs: inputSpecs(tensorBytes / 4).map((input, index) => ({ ...input, data: Array.from(data[index]) })),
    outputs: [{ name: 'OUTPUT0' }, { name: 'OUTPUT1' }]
  }
  const request: LoadRequest = {
    method: 'POST', path: INFER_PATH, headers: { 'content-type': 'application/json' }, body: Buffer.from(JSON.stringify(wire)), kind: 'json'
  }
  return {
    transport: 'json',
    tensorBytes,
    request,
    async verify () {
      const body = await (await post(url, request)).json() as { outputs: Array<{ name: string, data: number[] }> }
      const byName = new Map(body.outputs.map((output) => [output.name, output.data]))
      checkOutputs(inputs, byName.get('OUTPUT0') ?? [], byName.get('OUTPUT1') ?? [], 'json')
    },
    async dispose () {}
  }
}

/** A fixture for `transport` with tensors of `tensorBytes` (a multiple of 4), registered when in shared memory. */
export async function makeFixture (url: string, transport: Transport, tensorBytes: number): Promise<InferFixture> {
  const inputs = randomInputs(tensorBytes / 4)
  if (transport === 'binary') return binaryFixture(url, tensorBytes, inputs)
  if (transport === 'json') return jsonFixture(url, tensorBytes, inputs)
  const fixture = sharedMemoryFixture(url, tensorBytes, inputs)
  try {
    await fixture.setup()
  } catch (error) {
    await fixture.dispose()
    throw error
  }
  return fixture
}
