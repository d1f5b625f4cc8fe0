/**
 * @grpc/grpc-js and @grpc/proto-loader, loaded when first needed: they are optional peer
 * dependencies, and nothing of this package loads them unless gRPC is used.
 */
import type * as GrpcJs from '@grpc/grpc-js'
import type * as ProtoLoader from '@grpc/proto-loader'
import { optionalPeer } from '../util/optional-peer'

const FEATURE = 'fastify-triton-shm/grpc'

/** grpc-js; throws, naming the package, where it is not installed. `load` is `require`, or a stand-in. */
export const grpcJs = (load?: (name: string) => unknown): typeof GrpcJs =>
  optionalPeer<typeof GrpcJs>('@grpc/grpc-js', FEATURE, load)

/** proto-loader; throws, naming the package, where it is not installed. */
export const protoLoader = (load?: (name: string) => unknown): typeof ProtoLoader =>
  optionalPeer<typeof ProtoLoader>('@grpc/proto-loader', FEATURE, load)
