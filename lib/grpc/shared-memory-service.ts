/**
 * The shared memory RPCs of `GRPCInferenceService` over a registry: the same rules, messages and
 * gates as the HTTP routes, with Triton's gRPC codes. A host adds them to its own grpc-js server.
 */
import type { ServerUnaryCall, UntypedServiceImplementation } from '@grpc/grpc-js'
import type { SystemSharedMemoryRegistry } from '../../types'
import type {
  CudaSharedMemoryRegisterRequest, CudaSharedMemoryStatusRequest, CudaSharedMemoryStatusResponse, RegionStatusMessage,
  SharedMemoryServiceOptions, SystemSharedMemoryRegisterRequest, SystemSharedMemoryStatusRequest,
  SystemSharedMemoryStatusResponse, SystemSharedMemoryUnregisterRequest
} from '../../types/grpc'
import * as errors from '../errors'
import { carriesSecret } from '../restricted-api'
import type { ErrorLogger } from './status'
import { unary } from './unary'

type Gate = (call: ServerUnaryCall<unknown, unknown>) => void

/** A register field (uint64, a decimal string) as a number, refused where a number cannot hold it exactly. */
function registerNumber (field: string, value: string): number {
  const number = Number(value)
  if (!Number.isSafeInteger(number)) throw errors.unrepresentableField(field)
  return number
}

const statusMessage = (regions: RegionStatusMessage[]): SystemSharedMemoryStatusResponse =>
  ({ regions: Object.fromEntries(regions.map((region) => [region.name, region])) })

function restrictedGate (restrictedApi: SharedMemoryServiceOptions['restrictedApi']): Gate {
  if (restrictedApi === undefined) return () => {}
  const header = restrictedApi.header.toLowerCase()
  const expected = Buffer.from(restrictedApi.value)
  return (call) => {
    const [sent] = call.metadata.get(header)
    if (!carriesSecret(typeof sent === 'string' ? sent : undefined, expected)) throw errors.restrictedProtocol(restrictedApi.header)
  }
}

/**
 * `SystemSharedMemory{Status,Register,Unregister}` and, as a server without GPUs,
 * `CudaSharedMemory{Status,Register,Unregister}`, for `server.addService(inferenceService().service, ...)`.
 * Failed calls without a status of this package are logged to `log`.
 */
export function sharedMemoryService (registry: SystemSharedMemoryRegistry, options: SharedMemoryServiceOptions = {},
  log?: ErrorLogger): UntypedServiceImplementation {
  const { allowClientShm = true } = options
  const restricted = restrictedGate(options.restrictedApi)
  const clientShm: Gate = () => { if (!allowClientShm) throw errors.clientShmDisabled() }
  /** A unary handler answering `answer(request)` once the call passed the gates. */
  const rpc = <Request, Response>(gates: Gate[], answer: (request: Request) => Response) =>
    unary((call: ServerUnaryCall<Request, Response>) => {
      restricted(call)
      for (const gate of gates) gate(call)
      return answer(call.request)
    }, log)
  return {
    SystemSharedMemoryStatus: rpc([], ({ name }: SystemSharedMemoryStatusRequest) =>
      statusMessage(name === '' ? registry.status() : registry.status(name))),
    SystemSharedMemoryRegister: rpc([clientShm], ({ name, key, offset, byte_size: byteSize }: SystemSharedMemoryRegisterRequest) => {
      registry.register(name, { key, offset: registerNumber('offset', offset), byteSize: registerNumber('byte_size', byteSize) })
      return {}
    }),
    SystemSharedMemoryUnregister: rpc([clientShm], ({ name }: SystemSharedMemoryUnregisterRequest) => {
      if (name === '') registry.unregisterAll()
      else registry.unregister(name)
      return {}
    }),
    CudaSharedMemoryStatus: rpc([], ({ name }: CudaSharedMemoryStatusRequest): CudaSharedMemoryStatusResponse => {
      if (name !== '') throw errors.cudaRegionStatusNotFound(name)
      return { regions: {} }
    }),
    CudaSharedMemoryRegister: rpc([clientShm], ({ name }: CudaSharedMemoryRegisterRequest) => {
      if (name === '') throw errors.missingRegionName('cuda')
      throw errors.cudaNotSupported(name)
    }),
    // Triton's gRPC examples unregister CUDA regions first and stop if that fails.
    CudaSharedMemoryUnregister: rpc([], () => ({}))
  }
}
