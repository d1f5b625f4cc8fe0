/**
 * The shared memory RPCs of `GRPCInferenceService`: each decodes its message, calls the core's
 * `SharedMemoryApi` (which holds every rule, as for the HTTP routes) and encodes the answer, with
 * Triton's gRPC codes. A host adds them to its own grpc-js server with `sharedMemoryService`.
 */
import type { ServerUnaryCall, UntypedServiceImplementation } from '@grpc/grpc-js'
import type { SharedMemoryRegionStatus, SystemSharedMemoryRegistry } from '../../types'
import type {
  CudaSharedMemoryRegisterRequest, CudaSharedMemoryStatusResponse, SharedMemoryServiceOptions, SystemSharedMemoryRegisterRequest, SystemSharedMemoryStatusResponse
} from '../../types/grpc'
import { type ApiCaller, type Memory, type Operation, SharedMemoryApi } from '../registry/shared-memory-api'
import { RestrictedFeatures, restrictionGroups } from '../util/restricted-features'
import { connectionOf } from './connection-interceptor'
import { metadataValue } from './restricted-calls'
import type { ErrorLogger } from './status'
import { unary } from './unary'

interface NamedRequest { name: string }

/** The call as the core sees it: its metadata, read as headers, and its connection (none on a
 * server without `connectionInterceptor`). */
function callerOf (call: ServerUnaryCall<unknown, unknown>): Required<ApiCaller> {
  return {
    transport: 'grpc',
    header: (name) => metadataValue(call.metadata, name),
    connection: () => connectionOf(call)
  }
}

/** A uint64 field (a decimal string, as the protocol is loaded) as an exact integer: the core
 * decides what it may be. */
const uint64 = (value: string | number): bigint => BigInt(value)

const statusMessage = (regions: SharedMemoryRegionStatus[]): SystemSharedMemoryStatusResponse =>
  ({ regions: Object.fromEntries(regions.map((region) => [region.name, region])) })

/**
 * The shared memory RPCs over `api`. Failed calls without a status of this package are logged to `log`.
 */
export function sharedMemoryHandlers (api: SharedMemoryApi, log?: ErrorLogger,
  restrictions = new RestrictedFeatures([], 'grpc', 'sharedMemoryService')): UntypedServiceImplementation {
  /** A unary handler answering `answer(request, caller)` once the call passed the core's gates;
   * `refused` hears of every refusal, the gates' included. */
  const rpc = <Request, Response>(memory: Memory, operation: Operation, answer: (request: Request, caller: ApiCaller) => Response,
    refused?: (request: Request, error: Error) => void) =>
      unary((call: ServerUnaryCall<Request, Response>) => {
        const caller = callerOf(call)
        const end = operation === 'status' ? undefined : api.span(memory, operation, (call.request as NamedRequest).name, () => call.metadata.getMap())
        try {
          restrictions.check('shared-memory', caller.header)
          api.checkAccess(caller)
          api.checkEnabled(memory, operation)
          const response = answer(call.request, caller)
          end?.()
          return response
        } catch (error) {
          refused?.(call.request, error as Error)
          end?.(error)
          throw error
        }
      }, log)
  return {
    SystemSharedMemoryStatus: rpc('system', 'status', ({ name }: NamedRequest) => statusMessage(api.status('system', name))),
    SystemSharedMemoryRegister: rpc('system', 'register', (request: SystemSharedMemoryRegisterRequest, caller) => {
      const { name, key, offset, byte_size: byteSize } = request
      api.register('system', name, { key, offset: uint64(offset), byte_size: uint64(byteSize) }, caller)
      return {}
    }, ({ name }, error) => api.logRefusedRegister(name, error)),
    SystemSharedMemoryUnregister: rpc('system', 'unregister', ({ name }: NamedRequest) => {
      api.unregister('system', name)
      return {}
    }),
    CudaSharedMemoryStatus: rpc('cuda', 'status', ({ name }: NamedRequest): CudaSharedMemoryStatusResponse => {
      api.status('cuda', name)
      return { regions: {} }
    }),
    CudaSharedMemoryRegister: rpc('cuda', 'register', ({ name, raw_handle: rawHandle }: CudaSharedMemoryRegisterRequest, caller) => {
      api.register('cuda', name, rawHandle, caller)
      return {}
    }),
    CudaSharedMemoryUnregister: rpc('cuda', 'unregister', ({ name }: NamedRequest) => {
      api.unregister('cuda', name)
      return {}
    })
  }
}

/**
 * `SystemSharedMemory{Status,Register,Unregister}` and, as a server without GPUs,
 * `CudaSharedMemory{Status,Register,Unregister}` over `registry`, for
 * `server.addService(inferenceService().service, ...)`, with the plugin's access options. The
 * peer rule (`clientShmAccess` other than `any`) needs the server made with
 * `{ interceptors: [connectionInterceptor()] }`: without it no client's user is known, and every
 * register is refused. Failed calls without a status of this package are logged to `log`.
 */
export function sharedMemoryService (registry: SystemSharedMemoryRegistry, options: SharedMemoryServiceOptions = {},
  log?: ErrorLogger): UntypedServiceImplementation {
  const { allowClientShm, restrictedApi, restrictedProtocols, clientShmAccess } = options
  const restrictions = new RestrictedFeatures(restrictionGroups(restrictedProtocols, restrictedApi), 'grpc', 'sharedMemoryService')
  return sharedMemoryHandlers(new SharedMemoryApi(registry, { allowClientShm, clientShmAccess }), log, restrictions)
}
