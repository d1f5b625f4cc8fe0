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
  properties: {
    host: { type: 'string', minLength: 1 },
    port: { type: 'integer', minimum: 0, maximum: 65535 },
    models: { instanceOf: ModelTable },
    server: {
      type: 'object',
      additionalProperties: false,
      required: ['name', 'version'],
      properties: { name: { type: 'string' }, version: { type: 'string' } }
    },
    limits: inferLimitsSchema,
    maxMessageBytes: { ...positiveInteger, maximum: 2 ** 31 - 1 },
    restrictedProtocols: restrictionGroupsSchema,
    logging: { instanceOf: ServerLogging }
  }
} as const
