/**
 * How the plugin's listener measures and decodes each RPC's request, once it holds its bytes:
 * ModelInferRequest (ModelInfer's and ModelStreamInfer's) with the package's own decoder, every
 * other request as proto-loader decodes it for grpc-js, each measured first (`decoded-cost.ts`).
 */
import type { MethodDefinition } from '@grpc/proto-loader'
import * as errors from '../errors'
import { type Nested, protoLoaderDecodedBytes } from './decoded-cost'
import { decodedBytes, decodeModelInferRequest } from './model-infer-message'
import { loadProtocol, SERVICE } from './protocol'

export interface RequestDecoder {
  /** The request message's name, for errors. */
  readonly message: string
  /** Bytes its decoded form will take besides its own; throws for bytes that are no such message. Allocates nothing. */
  decodedBytes(bytes: Uint8Array): number
  /** The decoded message. */
  decode(bytes: Buffer): unknown
}

const MODEL_INFER: RequestDecoder = { message: 'ModelInferRequest', decodedBytes, decode: decodeModelInferRequest }

/** The requests with messages in them: the model repository's `map<string, ModelRepositoryParameter>`
 * and LogSettings' `map<string, SettingValue>`, an entry, and its value. */
const NESTED: Record<string, Nested> = { RepositoryModelLoad: { 3: { 2: {} } }, RepositoryModelUnload: { 3: { 2: {} } }, LogSettings: { 1: { 2: {} } } }

function protoLoaderDecoder (name: string, method: MethodDefinition<object, object>): RequestDecoder {
  const message = (method.requestType.type as { name: string }).name
  return {
    message,
    decodedBytes: (bytes) => protoLoaderDecodedBytes(message, bytes, NESTED[name]),
    decode: (bytes) => {
      try {
        return method.requestDeserialize(bytes)
      } catch (error) {
        throw errors.malformedMessage(message, (error as Error).message)
      }
    }
  }
}

/** Each RPC's decoder, by its path (`/inference.GRPCInferenceService/<name>`). */
export function requestDecoders (): Map<string, RequestDecoder> {
  const methods = loadProtocol()[SERVICE] as Record<string, MethodDefinition<object, object>>
  return new Map(Object.entries(methods).map(([name, method]) =>
    [method.path, name === 'ModelInfer' || name === 'ModelStreamInfer' ? MODEL_INFER : protoLoaderDecoder(name, method)]))
}
