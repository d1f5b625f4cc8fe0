import type { EventEmitter } from 'node:events'
import type { InFlightBudget } from './kserve'

/**
 * The public contract of fastify-triton-shm: the wire shapes of the published API, the plugin's
 * options, and the registry that the plugin decorates the Fastify instance with.
 */

/** One registered region as the status routes list it (the seed's `SharedMemoryRegion`). */
export interface SharedMemoryRegionStatus {
  name: string
  /** The key exactly as the client registered it, leading slashes kept. */
  key: string
  offset: number
  byte_size: number
}

/** Body of every error response (the seed's `ErrorResponse`). */
export interface ErrorResponse {
  error: string
}

/** Body of `POST .../region/<name>/register`. */
export interface RegisterRequestBody {
  key: string
  offset?: number
  byte_size: number
}

/** What a region is registered from, in the registry's (camelCase) terms. */
export interface RegionSource {
  /** POSIX shared memory object name, as given to `shm_open` (e.g. `/input_simple`). */
  key: string
  /** Where the region starts inside the object, in bytes. Any offset works. Default 0. */
  offset?: number
  /** Length of the region in bytes; at least 1. */
  byteSize: number
  /**
   * Whom the region is registered for: the object is mapped only if this user could open it
   * read-write itself (access(2)'s rule on its owner, group and mode; root may open any), else
   * `ERR_SHM_ACCESS_DENIED`. `null`: a client whose user is not known, refused
   * (`ERR_SHM_PEER_UNKNOWN`). Absent: any object this process can open (the host's own calls).
   */
  peer?: PeerIdentity | null
}

/**
 * A hold on part of a region for one use (typically one inference request). While any lease is
 * live the region stays mapped, even if it is unregistered meanwhile.
 */
export interface Lease {
  /** Zero-copy view of the leased bytes; writes go straight to the client's shared memory. */
  readonly buffer: Uint8Array
  readonly regionName: string
  /** Offset of the view inside the registered region. */
  readonly offset: number
  readonly byteSize: number
  /** True when this lease and `other` share a byte of one shared memory object, even through
   * different regions or keys (an output written there would change an input). */
  overlaps(other: Lease): boolean
  /** Ends the lease. Calling it again does nothing. */
  release(): void
}

/** A user as the kernel's permission checks see one: a uid and the gids of its groups (who a
 * client is, as the kernel knows it). */
export interface PeerIdentity {
  uid: number
  /** Ascending, without repeats; the primary group included. */
  gids: number[]
}

/** Decides whether a key may be registered: a pattern it must match, or a predicate. */
export type KeyRule = RegExp | ((key: string) => boolean)

export interface Limits {
  /** Most regions registered at once (default 1024). */
  maxRegions?: number
  /** Largest `byte_size` of one region, in bytes (default 16 GiB). */
  maxRegionBytes?: number
  /** Most bytes mapped over all regions, including those waiting for deferred unregister (default 64 GiB). */
  maxTotalBytes?: number
}

/** The registry's own options, for use without HTTP. */
export interface RegistryOptions {
  /** Only keys this rule accepts can be registered (the built-in key checks run first). */
  allowKey?: KeyRule
  /** Key prefixes that may never be registered, added to the built-in reserved prefix. */
  reservedKeyPrefixes?: string[]
  limits?: Limits
  /** One registry for every process of a service that opens the same store: see
   * `SharedRegistryOptions`. Without it, the registry lives in this process alone. */
  sharedRegistry?: SharedRegistryOptions
  /** Receives register/unregister at info and rejections at debug; defaults to silence. */
  logger?: RegistryLogger
  /** The most bytes the infer requests in flight of this process may hold together, over HTTP and
   * gRPC (`registry.inFlight`): bodies, decoded messages, output storage and answers, each charged
   * before it is allocated; a request that would pass it is refused with 503 and Retry-After
   * (gRPC RESOURCE_EXHAUSTED). Default `DEFAULT_MAX_IN_FLIGHT_BYTES`: 1 GiB, or half the V8 heap
   * limit where that is less (parsed JSON and decoded messages live on the heap). */
  maxInFlightBytes?: number
}

/**
 * A registry shared by every process that opens the same `path` (node:cluster workers, PM2's
 * cluster mode, servers behind one proxy): a SQLite database in WAL mode, through the optional
 * peer dependency `better-sqlite3`. All processes must run on one host, in one PID namespace.
 */
export interface SharedRegistryOptions {
  /** The store's file, created with mode 0600 if it does not exist. A tmpfs (`/run`, `/dev/shm`)
   * keeps commits in memory; the registry lives no longer than the processes that share it. */
  path: string
  /** How long a process waits for another's write to finish before answering 500 (or, opening
   * the store, before failing `app.ready()`). Default 5000. */
  busyTimeoutMs?: number
  /** How often an idle process checks for others' changes and for the holds of processes that
   * died. Default 1000. */
  checkIntervalMs?: number
}

/** The subset of a pino / Fastify logger the registry writes to. */
export interface RegistryLogger {
  info(object: object, message: string): void
  debug(object: object, message: string): void
}

export interface OpenApiOptions {
  /** Leave every route of this API out of the document. Default false. */
  hide?: boolean
  /** Tags of the system shared memory routes. Default `['System Shared Memory']`, as published. */
  systemTags?: string[]
  /** Tags of the CUDA shared memory routes. Default `['CUDA Shared Memory']`. */
  cudaTags?: string[]
  /** Put before every operationId (`replica_` makes `replica_systemSharedMemoryStatus`), so two
   * registrations in one app publish distinct ids. Default none: the seed's ids. */
  operationIdPrefix?: string
}

/** What a metrics plugin reads from the registry (see the README's metrics example). */
export interface RegistryCounters {
  /** Regions registered, including those waiting for a deferred unregister. */
  regions: number
  /** Bytes of all those regions. */
  bytesMapped: number
  /** Leases not yet released (typically, inference requests in flight), in this process. Every
   * other count is the whole registry's, shared or not. */
  liveLeases: number
  /** Regions unregistered while leased, waiting for their last lease. */
  deferredUnregisters: number
  /** Refused registrations and acquires since the registry was made, by error code. */
  rejections: Record<string, number>
}

/** Events of the registry, each with the region's status: `register`, and `unregister` when a
 * region is really unmapped (for a deferred unregister, when its last lease ends; on `close()`).
 * A shared registry emits them for other processes' changes too, when it notices them (see `sync`). */
export interface RegistryEvents {
  register: [region: SharedMemoryRegionStatus]
  unregister: [region: SharedMemoryRegionStatus]
}

/** The registry: every registered region of one Fastify instance. */
export interface SystemSharedMemoryRegistry extends EventEmitter<RegistryEvents> {
  /** Maps the region and adds it under `name`. Throws a `TritonError` on any failure. */
  register(name: string, source: RegionSource): void
  /** Removes the region now, or once its last lease ends. Unknown names are ignored. */
  unregister(name: string): void
  /** `unregister` for every region. */
  unregisterAll(): void
  /** Status of every region sorted by name, or of the named one (throws 404 if unknown). */
  status(name?: string): SharedMemoryRegionStatus[]
  has(name: string): boolean
  /**
   * Leases `[offset, offset + byteSize)` of a region (offset relative to the registration), with
   * Triton's checks and messages. Values may be numbers (even inexact ones above 2^53) or bigints.
   */
  acquire(name: string, offset: number | bigint, byteSize: number | bigint): Lease
  /** Counts for metrics: regions, bytes mapped, live leases, deferred unregisters, rejections. */
  counters(): RegistryCounters
  /** What the infer requests in flight of this process hold together, and the most they may:
   * every face that reads requests for this registry charges it. */
  readonly inFlight: InFlightBudget
  /**
   * Catches up with changes other processes made to a shared registry, emitting their `register`
   * and `unregister` events. Every other method does it first; a shared registry also does it
   * every `checkIntervalMs`. Without `sharedRegistry` there is nothing to catch up with.
   */
  sync(): void
  /**
   * Unregisters every region: those without live leases are unmapped at once, leased ones when
   * their last lease ends (a request in flight finishes with its views intact). `register` throws
   * from then on (503), as nothing would unmap a later region.
   */
  close(): void
}

export type * from './ensembles'
export type * from './kserve'
export type * from './logging'
export type * from './models'
export type * from './sequences'

/** The groups of endpoints Triton restricts (`--http-restricted-api`, `--grpc-restricted-protocol`). */
export type RestrictedCategory =
  | 'health' | 'metadata' | 'inference' | 'shared-memory' | 'model-config' | 'model-repository' | 'statistics' | 'trace' | 'logging'

/** One group of restricted categories: a call to any of them must carry `header` (gRPC: the metadata
 * key) with `value`, else it is refused (HTTP 403, gRPC UNAVAILABLE), as Triton's
 * `<categories>:<header>=<value>`. A category may be in one group only. */
export interface RestrictionGroup {
  categories: RestrictedCategory[]
  header: string
  value: string
}
