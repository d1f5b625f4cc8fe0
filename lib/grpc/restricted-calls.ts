/**
 * Triton's `--grpc-restricted-protocol` over gRPC: a handler of a restricted category answers a
 * call without its metadata key UNAVAILABLE `This protocol is restricted, ...` before it runs. A
 * stream is refused as it opens, before it reads a request, as Triton's stream handler refuses it.
 */
import type { handleBidiStreamingCall, handleUnaryCall, Metadata } from '@grpc/grpc-js'
import type { RestrictedCategory } from '../../types'
import type { RestrictedFeatures } from '../util/restricted-features'
import { type ErrorLogger, toServiceError } from './status'

/** The value of a call's metadata key (its first, if sent twice); a binary one is no header. */
export function metadataValue (metadata: Metadata, lowerCaseName: string): string | undefined {
  const [sent] = metadata.get(lowerCaseName)
  return typeof sent === 'string' ? sent : undefined
}

/** `handler`, refusing calls to `category` without its key while it is restricted. */
export function restrictedUnary<Request, Response> (restrictions: RestrictedFeatures, category: RestrictedCategory,
  handler: handleUnaryCall<Request, Response>, log?: ErrorLogger): handleUnaryCall<Request, Response> {
  if (!restrictions.isRestricted(category)) return handler
  return (call, callback) => {
    try {
      restrictions.check(category, (name) => metadataValue(call.metadata, name))
    } catch (error) {
      return callback(toServiceError(error, log))
    }
    return handler(call, callback)
  }
}

/** A stream `handler`, refusing streams to `category` without its key while it is restricted. */
export function restrictedStream<Request, Response> (restrictions: RestrictedFeatures, category: RestrictedCategory,
  handler: handleBidiStreamingCall<Request, Response>, log?: ErrorLogger): handleBidiStreamingCall<Request, Response> {
  if (!restrictions.isRestricted(category)) return handler
  return (call) => {
    try {
      restrictions.check(category, (name) => metadataValue(call.metadata, name))
    } catch (error) {
      call.emit('error', toServiceError(error, log))
      return
    }
    handler(call)
  }
}
