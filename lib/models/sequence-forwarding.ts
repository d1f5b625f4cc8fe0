/**
 * A request of a sequence that another process of the service owns (it started the sequence, and
 * keeps its state) runs there: the process that read it hands it over on the owner's socket and
 * relays what comes back, whatever transport brought it. The request travels as its transport
 * read it: its JSON form, where inputs and outputs in shared memory are region names and offsets
 * (every process maps the same regions: no tensor byte of them is copied), and the bytes of its
 * other inputs. Each response travels back as the owner encoded it (outputs in shared memory are
 * already in their regions), and is answered as if it were this process's own.
 */
import type { InferLimits, InferRequestWire } from '../../types/kserve'
import type { SequenceFlags } from '../../types/sequences'
import * as errors from '../errors'
import { TritonError } from '../errors'
import type { InferRequest } from '../kserve/infer-request'
import type { EncodedOutput, EncodedResponse } from '../kserve/output-tensors'
import type { ChannelFailure, ChannelMessage } from '../store/process-channel'
import { PeerGoneError } from '../store/process-channel'
import type { ServicePeers } from '../store/model-store'

/** A request handed to the owner of its sequence. */
export interface ForwardedRequest {
  kind: 'infer'
  model: string
  version: string
  request: InferRequestWire
  /** The correlation id as text, `integer` for an unsigned 64-bit one. */
  sequence: { id: string, integer: boolean, start: boolean, end: boolean }
  /** The limits it was read with; `null` for one left unbounded (JSON has no Infinity). */
  limits: Record<keyof InferLimits, number | null>
}

/** What each output of a response says of itself; its bytes, if it has any, are the next part. */
interface ForwardedOutput {
  name: string
  datatype: EncodedOutput['datatype']
  shape: number[]
  binary: boolean
}

interface ForwardedResponse {
  /** Absent from the last reply of a decoupled model whose last response had no final flag. */
  response?: { header: string, outputs: ForwardedOutput[] }
}

/** The message that hands `infer` (read for `version` of `model`) to the owner of its sequence. */
function requestMessage (model: string, version: string, infer: InferRequest): ChannelMessage {
  const { wire, inputBytes } = infer.forwardable
  const { correlationId, start, end } = infer.sequenceFlags as Required<SequenceFlags>
  const head: ForwardedRequest = {
    kind: 'infer',
    model,
    version,
    request: wire,
    sequence: { id: String(correlationId), integer: typeof correlationId === 'bigint', start, end },
    limits: mapLimits(infer.limits, (limit) => Number.isFinite(limit) ? limit : null)
  }
  return { head, parts: inputBytes }
}

function mapLimits<From, To> (limits: Record<keyof InferLimits, From>, map: (limit: From) => To): Record<keyof InferLimits, To> {
  return Object.fromEntries(Object.entries(limits).map(([name, limit]) => [name, map(limit as From)])) as Record<keyof InferLimits, To>
}

/** The limits of a forwarded request, as its first process read it. */
export function limitsOf ({ limits }: ForwardedRequest): Required<InferLimits> {
  return mapLimits(limits, (limit) => limit ?? Infinity)
}

/** The flags of a forwarded request, as its first process read them. */
export function sequenceFlagsOf ({ sequence: { id, integer, start, end } }: ForwardedRequest): SequenceFlags {
  return { correlationId: integer ? BigInt(id) : id, start, end }
}

/** The bytes of a forwarded request's inputs, one input after another, as they came. */
export function forwardedInputBytes (parts: Uint8Array[]) {
  let next = 0
  return {
    byteLength: parts.reduce((total, part) => total + part.byteLength, 0),
    take: () => parts[next++],
    finish: () => {}
  }
}

/** A response as the owner sends it back; `undefined` for a final flag alone. */
export function responseMessage (response: EncodedResponse | undefined): ChannelMessage {
  if (response === undefined) return { head: {} satisfies ForwardedResponse, parts: [] }
  const parts: Uint8Array[] = []
  const outputs = response.outputs.map(({ name, datatype, shape, binary }) => {
    if (binary !== undefined) parts.push(binary)
    return { name, datatype, shape, binary: binary !== undefined }
  })
  return { head: { response: { header: response.header, outputs } } satisfies ForwardedResponse, parts }
}

/** Takes a reply's response as the request's own; false for a final flag alone. */
function answer (infer: InferRequest, { head, parts }: ChannelMessage): boolean {
  const { response } = head as ForwardedResponse
  if (response === undefined) return false
  let next = 0
  const outputs = response.outputs.map(({ name, datatype, shape, binary }) => ({ name, datatype, shape, ...(binary && { binary: parts[next++] }) }))
  infer.answerWith({ header: response.header, binary: parts, outputs })
  return true
}

/** How a failure travels back: an error of this package, an HTTP error of the host's code
 * (`statusCode`), or anything else as a bare internal error (its text may name internals). */
export function failureOf (error: unknown): ChannelFailure & { statusCode?: number } {
  if (error instanceof TritonError) return { code: error.code, kind: error.kind, message: error.message }
  const { statusCode, message } = Object(error) as { statusCode?: unknown, message?: unknown }
  if (Number.isInteger(statusCode) && typeof message === 'string') return { code: '', kind: '', statusCode: statusCode as number, message }
  return { code: '', kind: '', statusCode: 500, message: 'Internal Server Error' }
}

/** An error the owner answered, rebuilt here. */
function rebuilt ({ code, kind, message, statusCode }: ChannelFailure & { statusCode?: number }): Error {
  return statusCode === undefined
    ? new TritonError(code, kind as TritonError['kind'], message)
    : Object.assign(new Error(message), { statusCode })
}

/** Triton's error for a sequence that is not there: its owner died with it, or never had it. The
 * request then ran nowhere: the process that read it counts its failure. */
const sequenceGone = (infer: InferRequest, model: string) =>
  Object.assign(errors.sequenceNotStarted(String(infer.sequenceFlags.correlationId), model), { ranNowhere: true })

/** Whether a forwarded request failed without reaching its owner, which counts every other outcome
 * itself (a client that leaves meanwhile included: the owner sees its run abandoned). */
export const ranNowhere = (error: unknown): boolean => (error as { ranNowhere?: unknown } | null)?.ranNowhere === true

/**
 * Runs `infer` (read for `version` of `model`) in the process `owner`, which owns its sequence:
 * `respond(final)` is called for each response, once `infer.encode()` gives it (false: the final
 * flag alone), and the owner goes on once it has settled. Rejects with the owner's error, with the
 * reason of the request's signal when its client goes, or with Triton's error for a sequence that
 * is not there when the owner has died (its sequences died with it).
 */
export async function runAtOwner (peers: ServicePeers, owner: number, model: string, version: string, infer: InferRequest,
  respond: (answered: boolean, final: boolean) => Promise<void> | void): Promise<void> {
  let last: ChannelMessage
  try {
    last = await peers.call(owner, requestMessage(model, version, infer), {
      signal: infer.signal,
      onReply: (reply) => respond(answer(infer, reply), false)
    })
  } catch (error) {
    if (error instanceof PeerGoneError) throw sequenceGone(infer, model)
    // The owner's failure arrives as what `failureOf` made of it; anything else happened here.
    throw error instanceof Error || error === infer.signal.reason ? error : rebuilt(error as ChannelFailure)
  }
  // No table there declares the model (it serves another table): it cannot own the sequence.
  if (last.head === null) throw sequenceGone(infer, model)
  await respond(answer(infer, last), true)
}
