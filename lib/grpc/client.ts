/**
 * The Node client's gRPC face: the methods of `KServeClient` over `GRPCInferenceService`, so a
 * flow written for one transport runs on the other. Infer requests are given in the HTTP API's
 * JSON shape and sent as a ModelInferRequest (tensor parameters typed as Triton's gRPC server
 * requires); a failed call rejects with grpc-js's ServiceError (its `code` and `details`).
 */
import type { Client, Metadata, ServiceError } from '@grpc/grpc-js'
import type { InferRequestWire, InferResponseWire, SharedMemoryRegionStatus, TensorParameters } from '../../types'
import type { InferParameter, ModelInferResponse, RegionStatusMessage } from '../../types/grpc'
import { grpcJs } from './peers'
import { inferenceService, MESSAGE_LIMIT_OPTIONS } from './protocol'

export interface GrpcClientOptions {
  /** Metadata sent with every call (e.g. the restricted API header). */
  metadata?: Record<string, string>
}

type Callback = (error: ServiceError | null, response: unknown) => void
type UnaryMethod = (request: object, metadata: Metadata, callback: Callback) => void

/** A parameter as Triton's gRPC server types it: integers as int64_param, other numbers as doubles. */
function inferParameter (value: string | number | boolean): InferParameter {
  if (typeof value === 'string') return { string_param: value }
  if (typeof value === 'boolean') return { bool_param: value }
  return Number.isInteger(value) ? { int64_param: value } : { double_param: value }
}

const inferParameters = (parameters: TensorParameters = {}) =>
  Object.fromEntries(Object.entries(parameters).map(([name, value]) => [name, inferParameter(value)]))

const regionStatus = ({ name, key, offset, byte_size: byteSize }: RegionStatusMessage): SharedMemoryRegionStatus =>
  ({ name, key, offset: Number(offset), byte_size: Number(byteSize) })

export class GrpcKServeClient {
  readonly #client: Client
  readonly #metadata: Metadata

  /** `address`: where the gRPC listener is, `host:port` (e.g. `127.0.0.1:8001`). */
  constructor (address: string, options: GrpcClientOptions = {}) {
    const grpc = grpcJs()
    const Service = inferenceService()
    this.#client = new Service(address, grpc.credentials.createInsecure(), MESSAGE_LIMIT_OPTIONS)
    this.#metadata = new grpc.Metadata()
    for (const [key, value] of Object.entries(options.metadata ?? {})) this.#metadata.set(key, value)
  }

  #call<Response> (method: string, request: object): Promise<Response> {
    const unary = (this.#client as unknown as Record<string, UnaryMethod>)[method].bind(this.#client)
    return new Promise((resolve, reject) =>
      unary(request, this.#metadata, (error, response) => (error === null ? resolve(response as Response) : reject(error))))
  }

  /** Status of every system shared memory region (sorted by name), or of the named one. */
  async systemSharedMemoryStatus (name = ''): Promise<SharedMemoryRegionStatus[]> {
    const { regions } = await this.#call<{ regions: Record<string, RegionStatusMessage> }>('SystemSharedMemoryStatus', { name })
    return Object.values(regions).map(regionStatus).sort((a, b) => Number(a.name > b.name) - Number(a.name < b.name))
  }

  async registerSystemSharedMemory (name: string, key: string, byteSize: number, offset = 0): Promise<void> {
    await this.#call('SystemSharedMemoryRegister', { name, key, offset, byte_size: byteSize })
  }

  /** Unregisters the named region, or every region when no name is given. */
  async unregisterSystemSharedMemory (name = ''): Promise<void> {
    await this.#call('SystemSharedMemoryUnregister', { name })
  }

  /** Unregisters every CUDA shared memory region, as Triton's clients do before they start. */
  async unregisterCudaSharedMemory (): Promise<void> {
    await this.#call('CudaSharedMemoryUnregister', { name: '' })
  }

  /** Sends an infer request given in the HTTP API's JSON shape (inputs from shared memory; `data`
   * is not sent: use `modelInfer` for raw contents). Outputs are listed without their bytes. */
  async infer (model: string, request: InferRequestWire): Promise<InferResponseWire> {
    const response = await this.modelInfer({
      model_name: model,
      id: request.id ?? '',
      inputs: request.inputs.map(({ name, datatype, shape, parameters }) => ({ name, datatype, shape, parameters: inferParameters(parameters) })),
      outputs: (request.outputs ?? []).map(({ name, parameters }) => ({ name, parameters: inferParameters(parameters) }))
    })
    return {
      ...(response.id !== '' && { id: response.id }),
      model_name: response.model_name,
      ...(response.model_version !== '' && { model_version: response.model_version }),
      outputs: response.outputs.map(({ name, datatype, shape }) => ({ name, datatype: datatype as InferResponseWire['outputs'][number]['datatype'], shape: shape.map(Number) }))
    }
  }

  /** Sends a ModelInferRequest as it is (raw_input_contents, typed contents, parameters). */
  modelInfer (request: object): Promise<ModelInferResponse> {
    return this.#call('ModelInfer', request)
  }

  close (): void {
    this.#client.close()
  }
}
