/**
 * ModelInfer over the model table: the call's model resolved, its request read, the model run and
 * timed as over HTTP, and its leases ended however the call ends. `answerModelInfer` is the call's
 * whole answer whatever carries it: grpc-js (`modelInferHandler`, for any grpc-js server), or the
 * plugin's listener serving the call on its HTTP/2 stream itself (`model-infer-streams.ts`).
 * What the call holds is charged to the registry's `inFlight` before it is allocated: its message
 * and the decoded form (the plugin's listener charges them as the message arrives, before it
 * decodes it), its output storage and its answer; it is given back once the call is over.
 */
import type { handleUnaryCall } from '@grpc/grpc-js'
import type { SystemSharedMemoryRegistry } from '../../types'
import type { InferLimits, InFlightReservation } from '../../types/kserve'
import type { ModelInferRequest, ModelInferResponse } from '../../types/grpc'
import type { InferRequest } from '../kserve/infer-request'
import { FaceTrace } from '../models/face-trace'
import type { ModelTable } from '../models/model-table'
import { onCallEnd } from './call-tracker'
import { type CancellableCall, modelInferResponse, readModelInferRequest } from './model-infer'
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

/** The answer's output bytes are copied twice at most: encoded by protobuf, then framed by grpc-js
 * (the listener's own ModelInfer writes the encoded bytes as they are: it holds less than charged). */
export const OUTPUT_COPIES = 2

/** One ModelInfer call, as its carrier hands it over. */
export interface ModelInferCall {
  /** Tells when the call is cancelled: its client went away, or the server cut it. */
  readonly call: CancellableCall
  /** Its message, decoded. */
  readonly request: ModelInferRequest
  /** What the call holds: its message so far; the answer's storage is charged to it too. */
  readonly reservation: InFlightReservation
  /** The call's metadata, where a trace's context comes from (`traceparent`). */
  readonly metadata: () => Readonly<Record<string, unknown>>
}

/** The response to `call`, or the error to answer it with (its leases ended then). `trace` is the
 * carrier's part of its trace, told when the answer is ready to send. */
export async function answerModelInfer ({ registry, models, limits }: ModelInferHandlerOptions, call: ModelInferCall,
  trace: FaceTrace): Promise<ModelInferResponse> {
  let infer: InferRequest | undefined
  try {
    const { model_name: name, model_version: version } = call.request
    const response = await models.infer(name, version === '' ? undefined : version, {
      read: (signature, modelVersion) => (infer = readModelInferRequest(call.call,
        { registry, model: signature, modelVersion, limits, reservation: call.reservation, outputCopies: OUTPUT_COPIES }, call.request)),
      respond: modelInferResponse,
      transport: 'grpc',
      traceCarrier: call.metadata,
      traced: (taken) => trace.take(taken)
    })
    trace.sending(true)
    return response
  } catch (error) {
    infer?.release()
    trace.sending(false)
    throw error
  }
}

/** The grpc-js handler of ModelInfer (`answerModelInfer` over a grpc-js call). */
export function modelInferHandler (options: ModelInferHandlerOptions): handleUnaryCall<ModelInferRequest, ModelInferResponse> {
  const { registry, log } = options
  return async (call, callback) => {
    // The plugin's listener charged the message and its decoded form already.
    const reservation = takeReservation(call.request) ?? registry.inFlight.open()
    // A host's own server may not tell when the call is over: there the answer, once handed to
    // grpc-js, is no longer counted.
    const tracked = onCallEnd(call, () => reservation.release())
    // The message is in: Triton's gRPC server has read it (GRPC_WAITREAD_START to _END).
    const trace = new FaceTrace('grpc')
    try {
      callback(null, await answerModelInfer(options, { call, request: call.request, reservation, metadata: () => call.metadata.getMap() }, trace))
    } catch (error) {
      callback(toServiceError(error, log))
    } finally {
      if (!tracked) reservation.release()
      // Sent once the call is over; a host's own server does not tell: once grpc-js has it.
      if (trace.traced && !onCallEnd(call, () => trace.sent())) trace.sent()
    }
  }
}
