/**
 * A ModelInfer handler for grpc-js: finds the model a call names, reads its request, runs the
 * model, answers, and ends its leases however the call ends.
 */
import type { handleUnaryCall } from '@grpc/grpc-js'
import type { SystemSharedMemoryRegistry } from '../../types'
import type { InferLimits, ModelSignature } from '../../types/kserve'
import type { ModelInferRequest, ModelInferResponse } from '../../types/grpc'
import type { InferRequest } from '../kserve/infer-request'
import { modelInferResponse, readModelInferRequest } from './model-infer'
import { type ErrorLogger, toServiceError } from './status'

/** A model as a transport serves it: its signature and what computes its outputs. */
export interface ServedModel {
  signature: ModelSignature
  /** Reads the inputs, fills the outputs (see `InferRequest`). */
  run(infer: InferRequest): void | Promise<void>
}

export interface ModelInferHandlerOptions {
  registry: SystemSharedMemoryRegistry
  /** The model a call names (`version` empty when it names none); throws (e.g. a 404
   * `SharedMemoryError`) for one the server does not serve. */
  model(name: string, version: string): ServedModel
  limits?: InferLimits
  /** Where failures that are not the client's are logged. */
  log?: ErrorLogger
}

export function modelInferHandler (options: ModelInferHandlerOptions): handleUnaryCall<ModelInferRequest, ModelInferResponse> {
  const { registry, limits, log } = options
  return async (call, callback) => {
    let infer: InferRequest | undefined
    try {
      const { model_name: name, model_version: version } = call.request
      const model = options.model(name, version)
      infer = readModelInferRequest(call, { registry, model: model.signature, limits })
      await model.run(infer)
      infer.signal.throwIfAborted()
      callback(null, modelInferResponse(infer, version === '' ? model.signature.versions?.at(-1) : version))
    } catch (error) {
      infer?.release()
      callback(toServiceError(error, log))
    }
  }
}
