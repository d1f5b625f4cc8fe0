/**
 * The plugin's options, and their check: made once at registration, so a mistake fails
 * `app.ready()` with a message naming the option instead of misbehaving at the first request.
 */
import type { OpenApiOptions, RegistryOptions, RestrictionGroup } from '../types'
import * as errors from './errors'
import { grpcListenerSchema, type GrpcListenerOptions } from './grpc/listener-options'
import { CLIENT_SHM_ACCESS, type ClientShmAccess } from './registry/peer-policy'
import { restrictedApiSchema } from './registry/shared-memory-api'
import { describeOptionProblem, positiveInteger, validatorOf } from './util/options-validator'
import { restrictionGroupsSchema } from './util/restricted-features'

export interface FastifyTritonShmOptions extends Omit<RegistryOptions, 'logger'> {
  /** Also serve KServe V2 over gRPC (`inference.GRPCInferenceService`) on a second port, with
   * the shared memory RPCs over this registry; needs `@grpc/grpc-js` and `@grpc/proto-loader`. */
  grpc?: GrpcListenerOptions
  /** Prefix of every route, e.g. `/triton`. Default: none. */
  prefix?: string
  /** Name of the decorator on the Fastify instance. Default `systemSharedMemory`. */
  decorator?: string
  /** When false, register and both system unregister routes answer 501, as Triton does without client
   * shared memory (status still works; the registry's own methods are not affected). Default true. */
  allowClientShm?: boolean
  /** Serve the whole API only to requests that carry this header with this value (else 403; over
   * the `grpc` listener, UNAVAILABLE): the `shared-memory` category on both transports. */
  restrictedApi?: { header: string, value: string }
  /** Triton's `--http-restricted-api`: the categories of these routes (`shared-memory`) served only
   * to requests that carry their group's header with its value (else 403). Every category Triton
   * has is accepted; an unknown one, or one in two groups (or here and in `restrictedApi`), fails
   * the registration with Triton's text. */
  restrictedApis?: RestrictionGroup[]
  /** Whose memory a client may register, over HTTP and gRPC: `peer` (default) only objects the
   * connecting client's own user could open read-write, `local` any object for any client on this
   * host, `any` any object for any client (see `ClientShmAccess`). */
  clientShmAccess?: ClientShmAccess
  /** How the routes appear in a host's OpenAPI document (@fastify/swagger). */
  openapi?: OpenApiOptions
}

/** The plugin's options, as the validator checks them (the README's table lists each). */
export const pluginOptionsSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    prefix: { type: 'string' },
    decorator: { type: 'string', minLength: 1 },
    allowClientShm: { type: 'boolean' },
    clientShmAccess: { enum: [...CLIENT_SHM_ACCESS] },
    restrictedApi: restrictedApiSchema,
    restrictedApis: restrictionGroupsSchema,
    allowKey: { keyRule: true },
    reservedKeyPrefixes: { type: 'array', items: { type: 'string', minLength: 1 } },
    maxInFlightBytes: positiveInteger,
    limits: {
      type: 'object',
      additionalProperties: false,
      properties: {
        maxRegions: positiveInteger,
        maxRegionBytes: positiveInteger,
        maxTotalBytes: positiveInteger
      }
    },
    sharedRegistry: {
      type: 'object',
      additionalProperties: false,
      required: ['path'],
      properties: {
        path: { type: 'string', minLength: 1 },
        busyTimeoutMs: positiveInteger,
        checkIntervalMs: positiveInteger
      }
    },
    openapi: {
      type: 'object',
      additionalProperties: false,
      properties: {
        hide: { type: 'boolean' },
        systemTags: { type: 'array', items: { type: 'string' } },
        cudaTags: { type: 'array', items: { type: 'string' } },
        operationIdPrefix: { type: 'string' }
      }
    },
    grpc: grpcListenerSchema,
    // Fastify's own register options, which reach the plugin with the others.
    logLevel: { type: 'string' },
    logSerializers: { type: 'object' }
  }
}

const problemOf = validatorOf(pluginOptionsSchema)

/** Returns the options if they are valid; throws `ERR_SHM_INVALID_OPTION` naming the wrong one otherwise. */
export function checkPluginOptions<Options extends FastifyTritonShmOptions> (options: Options): Options {
  const problem = problemOf(options)
  if (problem !== undefined) throw errors.invalidOption('fastify-triton-shm', describeOptionProblem(problem))
  return options
}
