/**
 * Triton's generate extension over HTTP: `POST .../generate` answers one JSON object, and
 * `.../generate_stream` one Server-Sent Event per response of the model (a decoupled one sends any
 * number). The request is the body's JSON object, read by `generateRequestWire`; it runs through
 * the model table as a request of a stream does (any model, counted in its statistics), held and
 * charged as an infer request is, and abandoned when its client goes away.
 */
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { InferRequestWire, ModelSignature } from '../../types/kserve'
import * as errors from '../errors'
import { generateRequestWire } from '../kserve/generate-request'
import { InferRequest, type ReadInferRequestOptions } from '../kserve/infer-request'
import { DEFAULT_INFER_LIMITS } from '../kserve/infer-limits'
import { NO_SEQUENCE } from '../kserve/sequence-flags'
import type { FaceTrace } from '../models/face-trace'
import type { ModelTable, StreamCall } from '../models/model-table'
import { EventStream } from './event-stream'
import { InferBody } from './infer-body'
import { dropWhenStalled, reservationFor, tiedToReply } from './infer-exchange'
import { httpTrace, traceReply } from './traced-reply'

export type GenerateRequest = FastifyRequest<{ Params: { model: string, version?: string } }>

/** What every generate request is read and run with. */
export interface GenerateOptions extends Omit<ReadInferRequestOptions, 'model' | 'modelVersion'> {
  /** Triton's `--http-max-input-size` (the plugin's `jsonLimit`): what the inputs may take once typed. */
  maxInputBytes: number
  /** The plugin's `beforeRun`, given the HTTP request. */
  beforeRun?: (request: FastifyRequest, infer: InferRequest) => void | Promise<void>
}

const sendTimeoutOf = ({ limits }: GenerateOptions): number => limits?.sendTimeoutMs ?? DEFAULT_INFER_LIMITS.sendTimeoutMs

/** The body's JSON object (undefined for no body). */
const jsonOf = ({ body }: FastifyRequest): unknown => body instanceof InferBody ? body.header : body

/** Reads the generate request of `request` for `model`: tied to the reply as an infer request is.
 * A generate request is never part of a sequence (Triton reads no sequence flags from it). */
function readGenerateRequest (request: GenerateRequest, reply: FastifyReply, options: GenerateOptions,
  model: ModelSignature, modelVersion: string): InferRequest {
  const { registry, limits, reservation } = options
  const readOptions: ReadInferRequestOptions = { registry, limits, reservation, model, modelVersion, sequence: NO_SEQUENCE, outputCopies: 1 }
  readOptions.reservation = reservationFor(request, reply, readOptions)
  const wire: InferRequestWire = generateRequestWire(jsonOf(request), model, options.maxInputBytes)
  return tiedToReply(request, reply, new InferRequest(wire, Buffer.alloc(0), readOptions))
}

/** The call a generate request makes on the model table; `admitted` is set once it may run. */
function generateCall (request: GenerateRequest, reply: FastifyReply, options: GenerateOptions, trace: FaceTrace,
  respond: StreamCall<string | undefined>['respond'], send: StreamCall<string | undefined>['send'], admitted: () => void): StreamCall<string | undefined> {
  const { beforeRun } = options
  return {
    traced: (taken) => trace.take(taken),
    read: (model, modelVersion) => readGenerateRequest(request, reply, options, model, modelVersion),
    beforeRun: async (infer) => {
      await beforeRun?.(request, infer)
      admitted()
    },
    respond,
    send,
    traceCarrier: () => request.headers
  }
}

/**
 * `POST .../generate`: the model's one response as a JSON object. A model that sends no response,
 * or more than one (a decoupled model), fails the request with Triton's error; only the first is
 * kept meanwhile.
 */
export async function generate (table: ModelTable, request: GenerateRequest, reply: FastifyReply, options: GenerateOptions): Promise<Buffer> {
  const { model, version } = request.params
  let responses = 0
  let first: string | undefined
  const respond = (infer: InferRequest) => {
    if (++responses === 1) first = infer.encodeGenerate()
    return undefined
  }
  const trace = httpTrace(reply)
  let responded = false
  try {
    await table.stream(model, version, generateCall(request, reply, options, trace, respond, async () => {}, () => {}))
    if (responses !== 1) throw errors.generateResponseCount()
    responded = true
  } finally {
    traceReply(trace, responded, reply)
  }
  dropWhenStalled(reply, sendTimeoutOf(options))
  // Bytes: sent with no charset, as Triton's `application/json`.
  reply.type('application/json')
  return Buffer.from(first as string)
}

/**
 * `POST .../generate_stream`: each response of the model as an event, as it is sent. An error
 * before the model runs (the model, the request, admission) is answered as JSON, as from any other
 * route; one of the run is an event (the first: with the error's status) that ends the stream.
 */
export async function generateStream (table: ModelTable, request: GenerateRequest, reply: FastifyReply, options: GenerateOptions): Promise<FastifyReply> {
  const { model, version } = request.params
  const events = new EventStream(reply, sendTimeoutOf(options))
  let running = false
  const send = async (json: string | undefined, final: boolean) => {
    if (json !== undefined) await events.write(json)
    if (final) events.end()
  }
  const trace = httpTrace(reply)
  let responded = false
  try {
    await table.stream(model, version, generateCall(request, reply, options, trace, (infer) => infer.encodeGenerate(), send, () => { running = true }))
    responded = true
  } catch (error) {
    if (!running && !events.started) throw error
    events.fail(error)
  } finally {
    traceReply(trace, responded, reply)
  }
  return reply
}
