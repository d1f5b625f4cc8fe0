/**
 * The protocol definition the package ships (proto/grpc_service.proto, Triton's field numbers),
 * loaded into a grpc-js service definition.
 */
import { existsSync } from 'node:fs'
import path from 'node:path'
import type { ServiceClientConstructor } from '@grpc/grpc-js'
import type { Options, PackageDefinition } from '@grpc/proto-loader'
import { deserializeModelInferRequest } from './model-infer-message'
import { grpcJs, protoLoader } from './peers'

/** How the messages reach handlers (see types/grpc.ts): field names as in the .proto, 64-bit
 * integers as exact decimal strings, every field present, oneofs named. */
export const GRPC_LOADER_OPTIONS: Readonly<Options> = { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true }

/** gRPC's length prefix before each message: a compression flag, then the message's length (4
 * bytes, big-endian). */
export const MESSAGE_PREFIX_BYTES = 5

/** Triton's limit each way: gRPC's 4 MiB default would refuse ordinary requests with their tensors. */
export const MAX_MESSAGE_BYTES = 2 ** 31 - 1

/** grpc-js channel options lifting its 4 MiB default to `MAX_MESSAGE_BYTES` each way: for a client
 * (a server's receive limit is better sized from what it may hold: see `messageLimitOptions`). */
export const MESSAGE_LIMIT_OPTIONS = {
  'grpc.max_receive_message_length': MAX_MESSAGE_BYTES,
  'grpc.max_send_message_length': MAX_MESSAGE_BYTES
} as const

/** grpc-js server options receiving messages of at most `receiveBytes`, compressed ones included
 * (grpc-js checks a compressed message's size as it inflates it, and stops there), and sending up
 * to `MAX_MESSAGE_BYTES`. */
export const messageLimitOptions = (receiveBytes: number) => ({
  'grpc.max_receive_message_length': receiveBytes,
  'grpc.max_send_message_length': MAX_MESSAGE_BYTES
})

/** The .proto: beside the sources in a checkout, two levels further up from the build. */
export const PROTO_PATH = [path.join(__dirname, '../../proto'), path.join(__dirname, '../../../proto')]
  .map((directory) => path.join(directory, 'grpc_service.proto'))
  .find((file) => existsSync(file)) as string

/** The protocol, as proto-loader loads it (`GRPC_LOADER_OPTIONS`). */
export const loadProtocol = (): PackageDefinition => protoLoader().loadSync(PROTO_PATH, GRPC_LOADER_OPTIONS)

/** The service's name in the protocol. */
export const SERVICE = 'inference.GRPCInferenceService'

/** `inference.GRPCInferenceService`: its `.service` is what `server.addService` takes; it is also
 * a client constructor. A server decodes ModelInferRequest (ModelInfer's and ModelStreamInfer's) with the package's own decoder
 * (`deserializeModelInferRequest`): typed contents as typed arrays, never an object per element,
 * and a message that would take more than 8 times its bytes once decoded refused before it is. */
export function inferenceService (): ServiceClientConstructor {
  const service = serviceOf(loadProtocol())
  service.service.ModelInfer.requestDeserialize = deserializeModelInferRequest
  service.service.ModelStreamInfer.requestDeserialize = deserializeModelInferRequest
  return service
}

/** The service with every request handed over as its bytes: the plugin's listener charges what a
 * message will take before it decodes it (`receivedMessages`). */
export function rawRequestsService (): ServiceClientConstructor {
  const service = serviceOf(loadProtocol())
  const asReceived = (bytes: Buffer) => bytes
  for (const method of Object.values(service.service)) method.requestDeserialize = asReceived
  return service
}

function serviceOf (definition: PackageDefinition): ServiceClientConstructor {
  const { inference } = grpcJs().loadPackageDefinition(definition) as unknown as { inference: { GRPCInferenceService: ServiceClientConstructor } }
  return inference.GRPCInferenceService
}
