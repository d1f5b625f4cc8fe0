/**
 * The example's models: the same signatures as Triton's example models of those names, so
 * Triton's own example clients and perf_analyzer can run against this server. `simple`,
 * `identity_fp32` and `tiny_classifier` are ONNX graphs (example/onnx) run by ONNX Runtime through
 * fastify-triton-shm/onnxruntime's runner, off the event loop; `simple_string` and `add_sub_fp32`
 * are JavaScript.
 */
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import type { BytesElements, InferRequest, ModelSignature } from '../lib/index'
import { OnnxRunner, onnxSignature, type OnnxSignatureOptions } from '../lib/onnxruntime'

export interface Model {
  signature: ModelSignature
  /** Reads the inputs, fills the outputs. */
  execute(infer: InferRequest): void | Promise<void>
  /** Loads the model again (a model repository load request), and ends it (an unload). */
  load?(): Promise<void>
  unload?(): void
}

const pair = (datatype: ModelSignature['inputs'][number]['datatype'], shape: number[], prefix: string) =>
  [0, 1].map((index) => ({ name: `${prefix}${index}`, datatype, shape }))

type NumericArray = Int32Array | Float32Array

/** INPUT0, INPUT1 -> OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1, element by element.
 * The first dimension is the batch, which both inputs share (so they have one shape). */
function sumAndDifference (name: string, datatype: 'INT32' | 'FP32', shape: number[], maxBatchSize: number): Model {
  return {
    signature: {
      name, versions: ['1'], platform: 'node', maxBatchSize, inputs: pair(datatype, shape, 'INPUT'), outputs: pair(datatype, shape, 'OUTPUT')
    },
    execute (infer) {
      const { data: a, shape } = infer.input<NumericArray>('INPUT0')
      const { data: b } = infer.input<NumericArray>('INPUT1')
      const sum = infer.output<NumericArray>('OUTPUT0', shape)
      const difference = infer.output<NumericArray>('OUTPUT1', shape)
      for (let index = 0, count = a.length; index < count; index++) {
        const left = a[index]
        const right = b[index]
        sum[index] = left + right
        difference[index] = left - right
      }
    }
  }
}

/** As `simple`, with BYTES tensors holding decimal integers as strings. */
const simpleString: Model = {
  signature: {
    name: 'simple_string',
    versions: ['1'],
    platform: 'node',
    maxBatchSize: 8,
    inputs: pair('BYTES', [-1, 16], 'INPUT'),
    outputs: pair('BYTES', [-1, 16], 'OUTPUT')
  },
  execute (infer) {
    const { data: a, shape } = infer.input<BytesElements>('INPUT0')
    const { data: b } = infer.input<BytesElements>('INPUT1')
    const sum = infer.output<Buffer[]>('OUTPUT0', shape)
    const difference = infer.output<Buffer[]>('OUTPUT1', shape)
    for (let index = 0; index < a.length; index++) {
      const left = Number.parseInt(String(a.at(index)), 10)
      const right = Number.parseInt(String(b.at(index)), 10)
      sum[index] = Buffer.from(String(left + right))
      difference[index] = Buffer.from(String(left - right))
    }
  }
}

/** FP32 vectors of any length (the one dimension is the batch, so both inputs have one length):
 * the benchmarks' model. */
const addSubFp32 = sumAndDifference('add_sub_fp32', 'FP32', [-1], Infinity)

/** A graph of example/onnx, run by ONNX Runtime on the runner's threads with no tensor byte
 * copied. A run holds its request's regions until it ends, so the runner needs no closing here.
 * A load request reads the file again into a new session, which takes over from the one before
 * (that one ends once its runs have); an unload ends the session. */
async function onnxModel (runner: OnnxRunner, file: string, options: OnnxSignatureOptions): Promise<Model> {
  const graph = path.join(__dirname, 'onnx', file)
  let model = await runner.load(graph)
  return {
    signature: onnxSignature(model, { versions: ['1'], ...options }),
    execute: (infer) => model.run(infer),
    async load () {
      const previous = model
      model = await runner.load(graph)
      previous.release()
    },
    unload: () => model.release()
  }
}

/** Every model of the example, by name. */
export async function loadModels (): Promise<Map<string, Model>> {
  const runner = new OnnxRunner()
  const onnxModels = await Promise.all([
    // Triton's example model: INT32 INPUT0, INPUT1 of shape [-1, 16], batches of up to 8.
    onnxModel(runner, 'simple.onnx', { name: 'simple', maxBatchSize: 8 }),
    onnxModel(runner, 'identity_fp32.onnx', { name: 'identity_fp32' }),
    onnxModel(runner, 'tiny_classifier.onnx', { name: 'tiny_classifier' })
  ])
  return new Map([...onnxModels, simpleString, addSubFp32].map((model) => [model.signature.name, model]))
}

/** Runs a model, first waiting `delayMs` (to show that regions in use outlive their unregister).
 * A client that left meanwhile gets no run: its regions may be unmapped already. */
export async function run (model: Model, infer: InferRequest, delayMs: number): Promise<void> {
  if (delayMs > 0) await sleep(delayMs)
  infer.signal.throwIfAborted()
  await model.execute(infer)
}
