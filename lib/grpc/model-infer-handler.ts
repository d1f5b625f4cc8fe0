/**
 * ModelInfer for grpc-js over the model table: the call's model resolved, its request read, the
 * model run and timed as over HTTP, the answer sent, and its leases ended however the call ends.
 */
import type { handleUnaryCall } from '@grpc/grpc-js'
import type { SystemSharedMemoryRegistry } from '../../types'
import type { InferLimits } from '../../types/kserve'
import type { ModelInferRequest, ModelInferResponse } from '../../types/grpc'
import type { InferRequest } from '../kserve/infer-request'
import type { ModelTable } from '../models/model-table'
import { modelInferResponse, readModelInferRequest } from './model-infer'
import { type ErrorLogger, toServiceError } from './status'

export interface ModelInferHandlerOptions {
  registry: SystemSharedMemoryRegistry
  /** The models served (the same table serves HTTP). */
  models: ModelTable
  limits?: InferLimits
  /** Where failures that are not the client's are logged. */
  log?: ErrorLogger
}

export function modelInferHandler ({ registry, models, limits, log }: ModelInferHandlerOptions): handleUnaryCall<ModelInferRequest, ModelInferResponse> {
  return async (call, callback) => {
    const { model_name: name, model_version: version } = call.request
    let infer: InferRequest | undefined
    try {
      const response = await models.infer(name, version === '' ? undefined : version, {
        read: (signature, modelVersion) => (infer = readModelInferRequest(call, { registry, model: signature, modelVersion, limits })),
        respond: modelInferResponse
      })
      callback(null, response)
    } catch (error) {
      infer?.release()
      callback(toServiceError(error, log))
    }
  }
}
