/**
 * ModelInfer for grpc-js over the model table: the call's model resolved, its request read, the
 * model run and timed as over HTTP, the answer sent, and its leases ended however the call ends.
 * What the call holds is charged to the registry's `inFlight` before it is allocated: its message
 * and the decoded form (the plugin's listener charges them as the message arrives, before it
 * decodes it), its output storage and its answer; it is given back once the call is over.
 */
import type { handleUnaryCall } from '@grpc/grpc-js'
import type { SystemSharedMemoryRegistry } from '../../types'
import type { InferLimits } from '../../types/kserve'
import type { ModelInferRequest, ModelInferResponse } from '../../types/grpc'
import type { InferRequest } from '../kserve/infer-request'
import { FaceTrace } from '../models/face-trace'
import type { ModelTable } from '../models/model-table'
import { onCallEnd } from './call-tracker'
import { modelInferResponse, readModelInferRequest } from './model-infer'
import { takeReservation } from './received-messages'
import { type ErrorLogger, toServiceError } from './status'

export interface ModelInferHandlerOptions {
  registry: SystemSharedMemoryRegistry
  /** The models served (the same table serves HTTP). */
  models: ModelTable
  limits?: InferLimits
  /** Where failures that are not the client's are logged. */
  log?: ErrorLogger
}

/** The answer's output bytes are copied twice: encoded by protobuf, then framed by grpc-js. */
export const OUTPUT_COPIES = 2

export function modelInferHandler ({ registry, models, limits, log }: ModelInferHandlerOptions): handleUnaryCall<ModelInferRequest, ModelInferResponse> {
  return async (call, callback) => {
    // The plugin's listener charged the message and its decoded form already.
    const reservation = takeReservation(call.request) ?? registry.inFlight.open()
    // A host's own server may not tell when the call is over: there the answer, once handed to
    // grpc-js, is no longer counted.
    const tracked = onCallEnd(call, () => reservation.release())
    let infer: InferRequest | undefined
    // The message is in: Triton's gRPC server has read it (GRPC_WAITREAD_START to _END).
    const trace = new FaceTrace('grpc')
    try {
      const { model_name: name, model_version: version } = call.request
      const response = await models.infer(name, version === '' ? undefined : version, {
        read: (signature, modelVersion) =>
          (infer = readModelInferRequest(call, { registry, model: signature, modelVersion, limits, reservation, outputCopies: OUTPUT_COPIES })),
        respond: modelInferResponse,
        transport: 'grpc',
        traceCarrier: () => call.metadata.getMap(),
        traced: (taken) => trace.take(taken)
      })
      trace.sending(true)
      callback(null, response)
    } catch (error) {
      infer?.release()
      trace.sending(false)
      callback(toServiceError(error, log))
    } finally {
      if (!tracked) reservation.release()
      // Sent once the call is over; a host's own server does not tell: once grpc-js has it.
      if (trace.traced && !onCallEnd(call, () => trace.sent())) trace.sent()
    }
  }
}
