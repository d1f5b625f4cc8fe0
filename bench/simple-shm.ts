/**
 * Triton's `simple` over shared memory, as the bench sends it: INPUT0 (0, 1, ..., 15) and INPUT1
 * (all 1), INT32 [1, 16], in one object; OUTPUT0 (their sum) and OUTPUT1 (their difference) in
 * another; each tensor 64 bytes. Its objects are made here; a server registers them as
 * `bench_<purpose>_in` and `bench_<purpose>_out`.
 */
import type { SharedMemoryObject } from '../lib/index'
import { makeObject, removeObject } from './shm-objects'

export const SIMPLE_TENSOR_BYTES = 64

/** A tensor's place in a region, as KServe's JSON parameters name it. */
export const jsonRegion = (region: string, offset: number) =>
  ({ shared_memory_region: region, shared_memory_offset: offset, shared_memory_byte_size: SIMPLE_TENSOR_BYTES })

/** The same place, as gRPC's `InferParameter`s name it. */
export const grpcRegion = (region: string, offset: number) => ({
  shared_memory_region: { string_param: region }, shared_memory_offset: { int64_param: offset }, shared_memory_byte_size: { int64_param: SIMPLE_TENSOR_BYTES }
})

const int32s = (bytes: Uint8Array, count: number) => new Int32Array(bytes.buffer, bytes.byteOffset, count)

/** What registers a region: an HTTP or gRPC client. */
interface Registering { registerSystemSharedMemory(name: string, key: string, byteSize: number): Promise<unknown> }

export class SimpleShm {
  readonly input: SharedMemoryObject
  readonly output: SharedMemoryObject
  readonly regions: { in: string, out: string }

  constructor (purpose: string) {
    this.input = makeObject(`${purpose}_in`, 2 * SIMPLE_TENSOR_BYTES)
    this.output = makeObject(`${purpose}_out`, 2 * SIMPLE_TENSOR_BYTES)
    this.regions = { in: `bench_${purpose}_in`, out: `bench_${purpose}_out` }
    int32s(this.input.bytes, 32).forEach((_, index, all) => { all[index] = index < 16 ? index : 1 })
  }

  /** The request's inputs and outputs, each tensor's place named by `parameters` (KServe's JSON
   * parameters by default). */
  wire<Parameters> (parameters: (region: string, offset: number) => Parameters) {
    return {
      inputs: [0, 1].map((index) => ({ name: `INPUT${index}`, datatype: 'INT32', shape: [1, 16], parameters: parameters(this.regions.in, index * SIMPLE_TENSOR_BYTES) })),
      outputs: [0, 1].map((index) => ({ name: `OUTPUT${index}`, parameters: parameters(this.regions.out, index * SIMPLE_TENSOR_BYTES) }))
    }
  }

  async register (client: Registering): Promise<void> {
    await client.registerSystemSharedMemory(this.regions.in, this.input.key, this.input.byteSize)
    await client.registerSystemSharedMemory(this.regions.out, this.output.key, this.output.byteSize)
  }

  /** Whether the outputs hold `simple`'s answer; they are cleared for the next check. */
  answered (): boolean {
    const sum = int32s(this.output.bytes, 16)
    const difference = int32s(this.output.bytes.subarray(SIMPLE_TENSOR_BYTES), 16)
    const right = sum.every((value, index) => value === index + 1) && difference.every((value, index) => value === index - 1)
    this.output.bytes.fill(0)
    return right
  }

  dispose (): void {
    removeObject(this.input)
    removeObject(this.output)
  }
}
