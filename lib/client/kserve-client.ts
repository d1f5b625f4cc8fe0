/**
 * A small HTTP client for a server with this API (or Triton itself): registers shared memory
 * regions (made with `SharedMemoryObject`) and sends inference requests that point at them.
 */
import type { ErrorResponse, InferRequestWire, InferResponseWire, SharedMemoryRegionStatus } from '../../types'
import { fetchExchange, type HttpExchange, socketExchange } from './http-exchange'

/** An error answered by the server, with its status and `{"error"}` message. */
export class ServerError extends Error {
  constructor (readonly statusCode: number, message: string) {
    super(message)
    this.name = 'ServerError'
  }
}

export interface ClientOptions {
  /** Headers sent with every request (e.g. the restricted API header). */
  headers?: Record<string, string>
  /** A Unix domain socket the server listens on (`app.listen({ path })`): requests go there, with
   * the path (and Host header) of `baseUrl` (e.g. `http://localhost`). */
  socketPath?: string
}

/** The `{"error"}` message of an error body; undefined for anything else (a proxy's HTML page, nothing). */
function errorMessage (text: string): string | undefined {
  try {
    const { error } = JSON.parse(text) as Partial<ErrorResponse>
    return typeof error === 'string' ? error : undefined
  } catch {
    return undefined
  }
}

const SYSTEM = '/v2/systemsharedmemory'
const CUDA = '/v2/cudasharedmemory'

export class KServeClient {
  readonly #baseUrl: string
  readonly #headers: Record<string, string>
  readonly #exchange: HttpExchange

  /** `baseUrl`: where the server listens, with any route prefix (e.g. `http://127.0.0.1:8000`;
   * with `socketPath`, e.g. `http://localhost`). */
  constructor (baseUrl: string, options: ClientOptions = {}) {
    this.#baseUrl = baseUrl.replace(/\/+$/, '')
    this.#headers = options.headers ?? {}
    this.#exchange = options.socketPath === undefined ? fetchExchange : socketExchange(options.socketPath)
  }

  async #call (method: 'GET' | 'POST', path: string, body?: unknown): Promise<string> {
    const { status, statusText, text } = await this.#exchange(this.#baseUrl + path, {
      method,
      headers: this.#headers,
      ...(body !== undefined && { body: JSON.stringify(body) })
    })
    if (status < 200 || status > 299) throw new ServerError(status, errorMessage(text) ?? statusText)
    return text
  }

  async #json<T> (method: 'GET' | 'POST', path: string, body?: unknown): Promise<T> {
    return JSON.parse(await this.#call(method, path, body)) as T
  }

  /** Status of every system shared memory region, or of the named one. */
  systemSharedMemoryStatus (name?: string): Promise<SharedMemoryRegionStatus[]> {
    const path = name === undefined ? `${SYSTEM}/status` : `${SYSTEM}/region/${encodeURIComponent(name)}/status`
    return this.#json('GET', path)
  }

  async registerSystemSharedMemory (name: string, key: string, byteSize: number, offset = 0): Promise<void> {
    await this.#call('POST', `${SYSTEM}/region/${encodeURIComponent(name)}/register`, { key, offset, byte_size: byteSize })
  }

  /** Unregisters the named region, or every region when no name is given. */
  async unregisterSystemSharedMemory (name?: string): Promise<void> {
    await this.#call('POST', name === undefined ? `${SYSTEM}/unregister` : `${SYSTEM}/region/${encodeURIComponent(name)}/unregister`)
  }

  /** Unregisters every CUDA shared memory region, as Triton's clients do before they start. */
  async unregisterCudaSharedMemory (): Promise<void> {
    await this.#call('POST', `${CUDA}/unregister`)
  }

  /** Sends a JSON infer request (inputs and outputs may point at registered regions). */
  infer (model: string, request: InferRequestWire): Promise<InferResponseWire> {
    return this.#json('POST', `/v2/models/${encodeURIComponent(model)}/infer`, request)
  }
}
