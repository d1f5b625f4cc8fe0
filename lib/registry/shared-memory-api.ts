/**
 * The shared memory API's rules, once for every transport (Triton's one SharedMemoryManager
 * behind both of its front ends): who may call it (the restricted API), what is switched on
 * (client shared memory), what a register request's fields must be, and CUDA shared memory
 * answered as a server without GPUs. The HTTP routes and the gRPC service only decode a request,
 * call this, and encode its answer or its error.
 */
import type { RegistryLogger, SharedMemoryRegionStatus, SystemSharedMemoryRegistry } from '../../types'
import * as errors from '../errors'
import { HEADER_NAME, RestrictedFeatures, restrictionGroups } from '../util/restricted-features'
import type { OperationSpans } from './operation-spans'
import { type CallerConnection, type ClientShmAccess, PeerPolicy } from './peer-policy'
import { regionSourceOf } from './register-fields'

/** The schema of the `restrictedApi` option. */
export const restrictedApiSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['header', 'value'],
  properties: {
    header: { type: 'string', pattern: HEADER_NAME },
    value: { type: 'string' }
  }
} as const

export interface SharedMemoryApiOptions {
  /** When false, register (system and CUDA) and system unregister are refused; status stays open. Default true. */
  allowClientShm?: boolean
  /** Whose memory a client may register (see `ClientShmAccess`). Default `peer`: only what the
   * connecting client's own user could open read-write. */
  clientShmAccess?: ClientShmAccess
  /** Serve the API only to calls that carry this header (gRPC: metadata key) with this value. */
  restrictedApi?: { header: string, value: string }
  /** Where refused registrations are logged (at debug, as the registry logs its own). */
  log?: RegistryLogger
}

/** One call of the API, as its face saw it. */
export interface ApiCaller {
  /** The transport: the restricted API answers in its words (Triton's differ). */
  readonly transport: 'http' | 'grpc'
  /** The value of a header (HTTP) or metadata key (gRPC) the call carries; undefined without one.
   * Absent for a face that checks its restrictions before the API (the plugin's routes): a call
   * with no headers to show is refused by a `restrictedApi`. */
  header?(name: string): string | undefined
  /** The call's connection, for the kernel to say who the client is (asked only by a register). */
  connection(): CallerConnection
}

/** The bytes of a `cudaIpcMemHandle_t`, the handle a CUDA registration carries. */
const CUDA_IPC_HANDLE_BYTES = 64

/** System or CUDA shared memory: the API has the same operations for both. */
export type Memory = 'system' | 'cuda'

export type Operation = 'status' | 'register' | 'unregister'

export class SharedMemoryApi {
  readonly registry: SystemSharedMemoryRegistry
  readonly #allowClientShm: boolean
  /** `restrictedApi`, in each transport's words. */
  readonly #restricted: Record<ApiCaller['transport'], RestrictedFeatures>
  readonly #peers: PeerPolicy
  readonly #log: RegistryLogger | undefined
  /** Refusals the registry logged itself. */
  readonly #loggedByRegistry = new WeakSet<object>()

  constructor (registry: SystemSharedMemoryRegistry, options: SharedMemoryApiOptions = {}) {
    const { allowClientShm = true, restrictedApi, clientShmAccess, log } = options
    this.registry = registry
    this.#allowClientShm = allowClientShm
    this.#peers = new PeerPolicy(clientShmAccess)
    this.#log = log
    const groups = restrictionGroups([], restrictedApi)
    this.#restricted = { http: new RestrictedFeatures(groups, 'http', 'SharedMemoryApi'), grpc: new RestrictedFeatures(groups, 'grpc', 'SharedMemoryApi') }
  }

  /** The restricted API, checked before everything else: throws unless the caller carries its header. */
  checkAccess (caller: ApiCaller): void {
    this.#restricted[caller.transport].check('shared-memory', (name) => caller.header?.(name))
  }

  /**
   * Triton's switch, checked next: without client shared memory, register and system unregister
   * are refused. A server without GPUs answers CUDA unregister whatever the switch says (Triton's
   * example clients unregister CUDA regions first, and stop if that fails).
   */
  checkEnabled (memory: Memory, operation: Operation): void {
    if (this.#allowClientShm || operation === 'status' || (memory === 'cuda' && operation === 'unregister')) return
    throw errors.clientShmDisabled()
  }

  /** Every region (no name, or an empty one), sorted by name, or the named one (404 if unknown). */
  status (memory: Memory, name?: string): SharedMemoryRegionStatus[] {
    if (memory === 'cuda') {
      if (name !== undefined && name !== '') throw errors.cudaRegionStatusNotFound(name)
      return []
    }
    return name === undefined || name === '' ? this.registry.status() : this.registry.status(name)
  }

  /** Registers `fields` (`{ key, offset, byte_size }`, as the transport decoded them) as region
   * `name`, for the caller: the object must be one the rule lets that client reach. */
  register (memory: Memory, name: string, fields: unknown, caller: ApiCaller): void {
    if (memory === 'cuda') this.#refuseCuda(name, fields, caller)
    if (name === '') throw errors.missingRegionName(memory)
    const source = regionSourceOf(fields)
    source.peer = this.#peers.peerFor(caller.connection())
    try {
      this.registry.register(name, source)
    } catch (error) {
      this.#loggedByRegistry.add(error as object)
      throw error
    }
  }

  /**
   * CUDA registrations, refused as a server without GPUs refuses them. Triton's gRPC face hands
   * the request's `raw_handle` (`fields` there) to CUDA without looking at the name, and CUDA
   * refuses what is no `cudaIpcMemHandle_t` as invalid args; its HTTP face asks for a name first.
   */
  #refuseCuda (name: string, fields: unknown, caller: ApiCaller): never {
    if (caller.transport === 'grpc') {
      if (!(fields instanceof Uint8Array) || fields.length !== CUDA_IPC_HANDLE_BYTES) throw errors.invalidCudaHandle()
    } else if (name === '') {
      throw errors.missingRegionName('cuda')
    }
    throw errors.cudaNotSupported(name)
  }

  /**
   * Logs a refused system registration as the registry logs those it refuses itself: faces call
   * it for every refusal of a register call (the restricted API, the switch, a body they could not
   * decode, a wrong field), and those the registry logged already are not logged twice.
   */
  logRefusedRegister (name: string, error: Error): void {
    if (this.#loggedByRegistry.has(error)) return
    this.#log?.debug({ region: name, reason: error.message }, 'refused to register system shared memory region')
  }

  /** Starts the span of a register or unregister call (its RPC's name) of `region` (none or empty:
   * every region), if the model table served with the registry traces them; `carrier`: the call's
   * headers or metadata. The function returned ends it, with the error that refused the call. */
  span (memory: Memory, operation: Exclude<Operation, 'status'>, region: string | undefined,
    carrier: () => Readonly<Record<string, unknown>>): ((error?: unknown) => void) | undefined {
    const spans = (this.registry as { operationSpans?: OperationSpans }).operationSpans
    if (spans === undefined) return undefined
    const name = `${memory === 'system' ? 'System' : 'Cuda'}SharedMemory${operation === 'register' ? 'Register' : 'Unregister'}`
    return spans({ name, ...(region !== undefined && region !== '' && { region }), carrier: carrier() })
  }

  /** Unregisters the named region, or every region (no name, or an empty one). Unknown names are no error. */
  unregister (memory: Memory, name?: string): void {
    if (memory === 'cuda') return
    if (name === undefined || name === '') this.registry.unregisterAll()
    else this.registry.unregister(name)
  }
}
