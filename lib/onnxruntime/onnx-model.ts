/**
 * A model loaded into the ONNX runner (`OnnxRunner.load`): a session of ONNX Runtime's C API in the
 * addon. A run happens on a worker thread, over the request's own memory: every input is an ORT
 * value over its tensor's bytes (a view of the client's region, or of the body), and every output
 * whose shape follows from the inputs' is an ORT value over its storage (`infer.output`), so ORT
 * writes it once, in place. An output whose shape ORT alone knows is allocated by ORT and copied
 * once into its storage.
 */
import type { InferenceSession } from 'onnxruntime-node'
import type { BytesElements, Datatype, TensorData } from '../../types/kserve'
import * as errors from '../errors'
import { bytesOf } from '../kserve/datatypes'
import type { InferRequest } from '../kserve/infer-request'
import type { Abandonable } from '../util/abandonable'
import { datatypeOf, ortTypeOfElement } from './datatypes'
import { type OrtAllocatedOutput, ortAddon, type OrtSessionHandle, type OrtValueInfo } from './ort-library'
import { namedDims, shapeOf } from './output-shapes'

type TypedArray = Exclude<TensorData, Buffer[] | BytesElements>

/** What a model needs of its runner: a turn within its bound on runs at once. */
export interface RunSlots {
  /** Waits for a turn; resolves with the function that ends it. Throws once the runner is closed,
   * and with the reason `waiter` is abandoned for if it is while it waits (leaving the queue at once). */
  acquire(waiter: Abandonable): Promise<() => void>
}

const metadataOf = ({ name, tensor, type, shape }: OrtValueInfo): InferenceSession.ValueMetadata =>
  tensor ? { name, isTensor: true, type: ortTypeOfElement(type), shape } : { name, isTensor: false }

/**
 * ORT is handed the request's bytes as the graph's element type: a signature of the host's own
 * that disagrees with the graph must be refused, not reinterpreted. BYTES are strings, which the
 * runner does not pass to ORT or take from it.
 */
function checkDatatype (name: string, datatype: Datatype, value: InferenceSession.ValueMetadata | undefined): void {
  if (datatype === 'BYTES') throw errors.onnxDatatypeUnsupported(name, datatype)
  const graphs = value?.isTensor === true ? datatypeOf(value.type) : undefined
  if (graphs !== datatype) throw errors.onnxRunFailed(`tensor '${name}' has datatype ${datatype}, the graph's has ${graphs ?? 'none'}`)
}

export class OnnxModel {
  /** The graph's inputs and outputs, as onnxruntime-node's sessions describe theirs: `onnxSignature` takes either. */
  readonly inputMetadata: readonly InferenceSession.ValueMetadata[]
  readonly outputMetadata: readonly InferenceSession.ValueMetadata[]
  readonly #session: OrtSessionHandle
  readonly #slots: RunSlots

  constructor (session: OrtSessionHandle, slots: RunSlots) {
    this.#session = session
    this.#slots = slots
    this.inputMetadata = session.inputs.map(metadataOf)
    this.outputMetadata = session.outputs.map(metadataOf)
  }

  /**
   * Runs `infer` and fills its outputs; respond with `infer.respond(reply)` as for any model. The
   * run holds the request's leases until it ends, even past a client that goes away (whose run is
   * then stopped); one whose client goes away while it waits for its turn leaves at once. ORT's
   * refusals are 400s with its message, without paths.
   */
  async run (infer: InferRequest): Promise<void> {
    const letGo = infer.retain()
    try {
      const end = await this.#slots.acquire(infer)
      try {
        infer.throwIfAbandoned()
        await this.#runNow(infer)
      } finally {
        end()
      }
    } finally {
      letGo()
    }
  }

  async #runNow (infer: InferRequest): Promise<void> {
    const inputs = this.inputMetadata.map(({ name }) => infer.input(name))
    inputs.forEach(({ name, datatype }, index) => checkDatatype(name, datatype, this.inputMetadata[index]))
    for (const { name, datatype } of infer.model.outputs.filter((output) => infer.requestedOutputs.includes(output.name))) {
      checkDatatype(name, datatype, this.outputMetadata.find((output) => output.name === name))
    }
    const sizes = namedDims(this.inputMetadata, infer)
    const outputIndices: number[] = []
    const outputBytes: Array<Uint8Array | null> = []
    const outputShapes: Array<number[] | null> = []
    for (const name of infer.requestedOutputs) {
      const index = this.outputMetadata.findIndex((output) => output.name === name)
      const shape = shapeOf(this.outputMetadata[index] as InferenceSession.TensorValueMetadata, sizes)
      outputIndices.push(index)
      outputBytes.push(shape === undefined ? null : bytesOf(infer.output<TypedArray>(name, shape)))
      outputShapes.push(shape ?? null)
    }
    const run = ortAddon.ortRun(this.#session, inputs.map((_, index) => index),
      inputs.map(({ data }) => bytesOf(data as TypedArray)), inputs.map(({ shape }) => shape),
      outputIndices, outputBytes, outputShapes)
    const stopListening = infer.onAbandoned(() => ortAddon.ortTerminate(run))
    let results: Array<OrtAllocatedOutput | null>
    try {
      results = await run.done
    } catch (error) {
      infer.throwIfAbandoned()
      throw errors.onnxRunFailed((error as Error).message)
    } finally {
      stopListening()
    }
    results.forEach((result, index) => { if (result !== null) store(infer, infer.requestedOutputs[index], result) })
  }

  /** Ends the session once its runs have ended (`OnnxRunner.close` does, for every model). */
  release (): void {
    ortAddon.ortRelease(this.#session)
  }
}

/** Copies an output ORT allocated into the request's storage for it: the one copy it takes. */
function store (infer: InferRequest, name: string, { data, shape }: OrtAllocatedOutput): void {
  bytesOf(infer.output(name, shape) as TypedArray).set(new Uint8Array(data))
}
