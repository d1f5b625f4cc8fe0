/**
 * The protocol definition the package ships (proto/grpc_service.proto, Triton's field numbers),
 * loaded into a grpc-js service definition.
 */
import { existsSync } from 'node:fs'
import path from 'node:path'
import type { ServiceClientConstructor } from '@grpc/grpc-js'
import type { Options } from '@grpc/proto-loader'
import { grpcJs, protoLoader } from './peers'

/** How the messages reach handlers (see types/grpc.ts): field names as in the .proto, 64-bit
 * integers as exact decimal strings, every field present, oneofs named. */
export const GRPC_LOADER_OPTIONS: Readonly<Options> = { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true }

/** Triton's limit each way: gRPC's 4 MiB default would refuse ordinary requests with their tensors. */
export const MAX_MESSAGE_BYTES = 2 ** 31 - 1

/** grpc-js channel options (server or client) lifting its 4 MiB default to `MAX_MESSAGE_BYTES` each way. */
export const MESSAGE_LIMIT_OPTIONS = {
  'grpc.max_receive_message_length': MAX_MESSAGE_BYTES,
  'grpc.max_send_message_length': MAX_MESSAGE_BYTES
} as const

/** The .proto: beside the sources in a checkout, two levels further up from the build. */
export const PROTO_PATH = [path.join(__dirname, '../../proto'), path.join(__dirname, '../../../proto')]
  .map((directory) => path.join(directory, 'grpc_service.proto'))
  .find((file) => existsSync(file)) as string

/** `inference.GRPCInferenceService`: its `.service` is what `server.addService` takes; it is also
 * a client constructor. */
export function inferenceService (): ServiceClientConstructor {
  const definition = protoLoader().loadSync(PROTO_PATH, GRPC_LOADER_OPTIONS)
  const { inference } = grpcJs().loadPackageDefinition(definition) as unknown as { inference: { GRPCInferenceService: ServiceClientConstructor } }
  return inference.GRPCInferenceService
}
