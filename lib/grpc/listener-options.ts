/** The options of the plugin's gRPC listener (the plugin's `grpc` option), and their schema. */
import { inferLimitsSchema } from '../kserve/infer-limits'
import type { RestrictionGroup } from '../../types'
import type { InferLimits } from '../../types/kserve'
import { ModelTable } from '../models/model-table'
import { ServerLogging } from '../models/server-logging'
import { positiveInteger } from '../util/options-validator'
import { restrictionGroupsSchema } from '../util/restricted-features'

/** The plugin's gRPC listener (`grpc` option): KServe V2 over gRPC on the plugin's registry. */
export interface GrpcListenerOptions {
  /** Address to listen on. Default `127.0.0.1`. */
  host?: string
  /** Port to listen on; 0 lets the system choose (read it from `app.tritonGrpc.port`). Default 8001, as Triton's. */
  port?: number
  /** A Unix domain socket to listen on (clients reach it as `unix://<path>`), at most 107 bytes:
   * beside `host` and `port` when either is given, instead of them when neither is. A file already
   * there is refused (`ERR_SHM_GRPC_SOCKET_PATH_TAKEN`), never removed; the socket's file is
   * removed when the app closes. */
  path?: string
  /** The socket file's permission bits (e.g. `0o660`), set as soon as it is bound. Default: as the umask leaves them. */
  socketMode?: number
  /** The socket file's owner and group, set as soon as it is bound (another owner needs root). Default: the server's. */
  socketOwner?: { uid?: number, gid?: number }
  /** The models ModelInfer, ModelMetadata, ModelConfig... serve: the table the HTTP routes serve. Default none. */
  models?: ModelTable
  /** The server's name and version in `ServerMetadata`. */
  server?: { name: string, version: string }
  /** What one inference request may cost. Its `sendTimeoutMs` also bounds a stop: calls still
   * open that long after the app began to close are cut. */
  limits?: InferLimits
  /**
   * The largest message received, in bytes, compressed ones once inflated (grpc-js stops inflating
   * one at this size). Default: a quarter of the plugin's `maxInFlightBytes` (256 MiB of its 1 GiB),
   * at most 2^31-1, Triton's fixed limit: one request of that size fits in flight with its answer.
   */
  maxMessageBytes?: number
  /** How long a call may take to send its request: a unary call's whole request (its message, and
   * its end) from its start, a stream's each message from its first byte. A call still sending
   * then is cancelled, and what it held let go. Default 60 000 (a minute). */
  receiveTimeoutMs?: number
  /** Triton's `--grpc-restricted-protocol`: the RPCs of these categories served only to calls whose
   * metadata carries their group's key (as given: Triton's clients send `triton-grpc-protocol-<key>`)
   * with its value, else UNAVAILABLE. An unknown category, or one in two groups (or here and in
   * the plugin's `restrictedApi`), fails the registration with Triton's text. */
  restrictedProtocols?: RestrictionGroup[]
  /** Serve Triton's logging extension (`LogSettings`): the same `ServerLogging` the model
   * endpoints' `logging` option serves over HTTP. Default none (UNIMPLEMENTED). */
  logging?: ServerLogging
}

export const grpcListenerSchema = {
  type: 'object',
  additionalProperties: false,
  // The socket's mode and owner are the socket file's: without a path there is none.
  dependencies: { socketMode: ['path'], socketOwner: ['path'] },
  properties: {
    host: { type: 'string', minLength: 1 },
    port: { type: 'integer', minimum: 0, maximum: 65535 },
    path: { type: 'string', minLength: 1 },
    socketMode: { type: 'integer', minimum: 0, maximum: 0o7777 },
    socketOwner: {
      type: 'object',
      additionalProperties: false,
      properties: { uid: { type: 'integer', minimum: 0 }, gid: { type: 'integer', minimum: 0 } }
    },
    models: { instanceOf: ModelTable },
    server: {
      type: 'object',
      additionalProperties: false,
      required: ['name', 'version'],
      properties: { name: { type: 'string' }, version: { type: 'string' } }
    },
    limits: inferLimitsSchema,
    maxMessageBytes: { ...positiveInteger, maximum: 2 ** 31 - 1 },
    receiveTimeoutMs: positiveInteger,
    restrictedProtocols: restrictionGroupsSchema,
    logging: { instanceOf: ServerLogging }
  }
} as const

/** How long a call may take to send its request, unless the listener is told otherwise. */
export const DEFAULT_RECEIVE_TIMEOUT_MS = 60_000

/** Whether the listener listens on TCP: unless it was given a Unix socket and neither host nor port. */
export const servesTcp = ({ host, port, path }: GrpcListenerOptions): boolean => path === undefined || host !== undefined || port !== undefined
