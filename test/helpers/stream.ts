/**
 * ModelStreamInfer over a real grpc-js connection on 127.0.0.1: a server serving the stream (and
 * the shared memory RPCs, ModelInfer) from a model table, with its `OpenStreams` at hand, and a
 * stream client that collects what it receives, so a test waits for responses, never for time.
 */
import { type ClientDuplexStream, credentials, Metadata, type ServiceError, type StatusObject } from '@grpc/grpc-js'
import type { Test } from 'tap'
import {
  inferenceService, MESSAGE_LIMIT_OPTIONS, modelInferHandler, type ModelStreamInferOptions, modelStreamInferHandler, OpenStreams,
  sharedMemoryService
} from '../../lib/grpc'
import type { ModelTable } from '../../lib/index'
import type { SystemSharedMemoryRegistry } from '../../types'
import type { ModelStreamInferResponse } from '../../types/grpc'
import { grpcClient, type GrpcClient, startServer } from './grpc'
import { bounded } from './sync'

export interface StreamServer {
  port: number
  streams: OpenStreams
  /** A unary client of the same server. */
  client: GrpcClient
}

/** A server of ModelStreamInfer, ModelInfer and the shared memory RPCs over `registry` and `models`. */
export async function startStreamServer (t: Test, registry: SystemSharedMemoryRegistry, models: ModelTable,
  options: Partial<ModelStreamInferOptions> = {}): Promise<StreamServer> {
  const streams = options.streams ?? new OpenStreams()
  const port = await startServer(t, {
    ...sharedMemoryService(registry),
    ModelInfer: modelInferHandler({ registry, models }),
    ModelStreamInfer: modelStreamInferHandler({ registry, models, ...options, streams })
  })
  return { port, streams, client: grpcClient(t, port) }
}

export interface StreamClient {
  readonly call: ClientDuplexStream<object, ModelStreamInferResponse>
  /** Every response received so far, in order. */
  readonly received: ModelStreamInferResponse[]
  write(request: object): void
  /** Resolves once `count` responses in all have arrived: those `count`. */
  until(count: number): Promise<ModelStreamInferResponse[]>
  /** Half-closes the stream; resolves with its status once the server ended it. */
  end(): Promise<StatusObject>
  /** The stream's status, once it ends (an error status for a cancelled or failed stream). */
  readonly status: Promise<StatusObject>
}

/** Opens a stream to `port` (closed when the test ends). */
export function streamClient (t: Test, port: number, metadata: Record<string, string> = {}): StreamClient {
  const Client = inferenceService()
  const client = new Client(`127.0.0.1:${port}`, credentials.createInsecure(), MESSAGE_LIMIT_OPTIONS)
  t.teardown(() => client.close())
  const sent = new Metadata()
  for (const [key, value] of Object.entries(metadata)) sent.set(key, value)
  const call = (client as unknown as Record<string, (metadata: Metadata) => ClientDuplexStream<object, ModelStreamInferResponse>>)
    .ModelStreamInfer(sent)
  t.teardown(() => call.cancel())
  const received: ModelStreamInferResponse[] = []
  const waiters: Array<{ count: number, resolve: () => void }> = []
  call.on('data', (response: ModelStreamInferResponse) => {
    received.push(response)
    for (const waiter of waiters.filter(({ count }) => received.length >= count)) {
      waiters.splice(waiters.indexOf(waiter), 1)
      waiter.resolve()
    }
  })
  // A cancelled or failed stream reports its status; the error event repeats it.
  call.on('error', (_error: ServiceError) => {})
  const status = new Promise<StatusObject>((resolve) => call.on('status', resolve))
  return {
    call,
    received,
    write: (request) => { call.write(request) },
    until: async (count) => {
      if (received.length < count) {
        await bounded(new Promise<void>((resolve) => waiters.push({ count, resolve })), `${count} responses (${received.length} so far)`)
      }
      return received.slice(0, count)
    },
    end: () => {
      call.end()
      return bounded(status, 'the end of the stream')
    },
    status
  }
}

// Messages

export const int32Bytes = (values: number[]) => Buffer.from(Int32Array.from(values).buffer)
export const int32s = (bytes: Uint8Array) => Array.from(new Int32Array(Uint8Array.from(bytes).buffer))

export const int64 = (value: number | string) => ({ int64_param: value })
export const bool = (value: boolean) => ({ bool_param: value })
export const string = (value: string) => ({ string_param: value })

export const shmParameters = (region: string, byteSize: number, offset = 0) => ({
  shared_memory_region: string(region),
  shared_memory_byte_size: int64(byteSize),
  shared_memory_offset: int64(offset)
})

/** The sequence parameters of a request, as Triton's Python client sets them. */
export const sequenceParameters = (id: number | string, start = false, end = false) => ({
  sequence_id: typeof id === 'string' ? string(id) : int64(id),
  sequence_start: bool(start),
  sequence_end: bool(end)
})

/** The response's `triton_final_response` parameter, or undefined. */
export const finalFlag = (response: ModelStreamInferResponse): boolean | undefined =>
  response.infer_response.parameters?.triton_final_response?.bool_param
