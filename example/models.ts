/**
 * The example's models: the same signatures and behaviour as Triton's example models of those
 * names (its docs/examples/model_repository, the repeat backend, the QA's dyna_sequence backend),
 * so Triton's own example clients and perf_analyzer can run against this server. `simple`,
 * `identity_fp32` and `tiny_classifier` are ONNX graphs (example/onnx) run by ONNX Runtime through
 * fastify-triton-shm/onnxruntime's runner, off the event loop; the others are JavaScript: the
 * stateful ones (`simple_sequence`, `simple_dyna_sequence`, `simple_string_dyna_sequence`) read
 * Triton's control inputs and their sequence's state, the decoupled one (`repeat_int32`) sends
 * its responses one by one.
 */
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import type { BytesElements, InferRequest, ModelSignature, SequenceBatching } from '../lib/index'
import { OnnxRunner, onnxSignature, type OnnxSignatureOptions } from '../lib/onnxruntime'
import { decoupledModels } from './decoupled-models'
import { decoupledEnsembles, parametersEnsemble, zeroEnsembles } from './ensemble-models'
import { mockLlm } from './generate-models'
import { identityModels } from './identity-models'
import type { Model } from './model'
import { optionalInputModels } from './optional-input-models'
import { parameterModel } from './parameter-model'

export type { Model }

/** A client's mistake a model finds: answered 400 over HTTP, INVALID_ARGUMENT over gRPC. */
const invalidRequest = (message: string) => Object.assign(new Error(message), { statusCode: 400 })

const shapeText = (shape: number[]) => `[${shape.join(',')}]`

const pair = (datatype: ModelSignature['inputs'][number]['datatype'], shape: number[], prefix: string) =>
  [0, 1].map((index) => ({ name: `${prefix}${index}`, datatype, shape }))

type NumericArray = Int8Array | Int32Array | Float32Array

/** INPUT0, INPUT1 -> OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1, element by element (an
 * INT8 result wraps, as the cast back of Triton's graph does). Both inputs have one shape. */
export function sumAndDifference (name: string, datatype: 'INT8' | 'INT32' | 'FP32', shape: number[], maxBatchSize: number): Model {
  return {
    signature: {
      name, versions: ['1'], platform: 'node', maxBatchSize, inputs: pair(datatype, shape, 'INPUT'), outputs: pair(datatype, shape, 'OUTPUT')
    },
    execute (infer) {
      const { data: a, shape } = infer.input<NumericArray>('INPUT0')
      const { data: b, shape: otherShape } = infer.input<NumericArray>('INPUT1')
      if (shapeText(shape) !== shapeText(otherShape)) {
        throw invalidRequest(`INPUT0 and INPUT1 must have one shape, got ${shapeText(shape)} and ${shapeText(otherShape)}`)
      }
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

/** FP32 vectors of any length (both inputs of one length): the benchmarks' model. Configured as
 * Triton configures such a model, without a batch dimension (`max_batch_size: 0`, `dims: [-1]`), so
 * perf_analyzer's `--shape INPUT0:<n>` sets its length. */
const addSubFp32 = sumAndDifference('add_sub_fp32', 'FP32', [-1], 0)

/** Triton's `simple_int8`: as `simple`, in INT8. */
const simpleInt8 = sumAndDifference('simple_int8', 'INT8', [-1, 16], 8)

const INT32_FLAG = { datatype: 'INT32', falseTrue: [0, 1] } as const

/** One INT32 in, one out, batches of one sequence request (Triton's sequence models' signature). */
const sequenceSignature = (name: string): ModelSignature => ({
  name,
  versions: ['1'],
  platform: 'node',
  maxBatchSize: 8,
  inputs: [{ name: 'INPUT', datatype: 'INT32', shape: [-1, 1] }],
  outputs: [{ name: 'OUTPUT', datatype: 'INT32', shape: [-1, 1] }]
})

const first = (infer: InferRequest, name: string) => Number(infer.input<Int32Array | BigUint64Array>(name).data[0])

/** Triton's `simple_sequence` (its ONNX graph): OUTPUT = READY * (INPUT + START), from its START and READY controls. */
const simpleSequence: Model = {
  signature: sequenceSignature('simple_sequence'),
  sequenceBatching: {
    controlInputs: [{ name: 'START', kind: 'CONTROL_SEQUENCE_START', ...INT32_FLAG }, { name: 'READY', kind: 'CONTROL_SEQUENCE_READY', ...INT32_FLAG }]
  },
  execute (infer) {
    infer.output<Int32Array>('OUTPUT', [1, 1])[0] = first(infer, 'READY') * (first(infer, 'INPUT') + first(infer, 'START'))
  }
}

const dynaControls = (corridDatatype: 'UINT64' | 'BYTES'): SequenceBatching => ({
  maxSequenceIdleMicroseconds: 10_000_000,
  controlInputs: [
    { name: 'START', kind: 'CONTROL_SEQUENCE_START', ...INT32_FLAG },
    { name: 'END', kind: 'CONTROL_SEQUENCE_END', ...INT32_FLAG },
    { name: 'READY', kind: 'CONTROL_SEQUENCE_READY', ...INT32_FLAG },
    { name: 'CORRID', kind: 'CONTROL_SEQUENCE_CORRID', datatype: corridDatatype }
  ]
})

/** Triton's `simple_dyna_sequence` (its ONNX graph): OUTPUT = READY * (INPUT + START + END * CORRID),
 * the correlation id (UINT64, cast to INT32) added to the last request of a sequence. */
const simpleDynaSequence: Model = {
  signature: sequenceSignature('simple_dyna_sequence'),
  sequenceBatching: dynaControls('UINT64'),
  execute (infer) {
    const corrid = Number(BigInt.asIntN(32, infer.input<BigUint64Array>('CORRID').data[0]))
    infer.output<Int32Array>('OUTPUT', [1, 1])[0] =
      first(infer, 'READY') * (first(infer, 'INPUT') + first(infer, 'START') + first(infer, 'END') * corrid)
  }
}

/** What Triton's QA serves as `simple_string_dyna_sequence` (its dyna_sequence backend, string
 * correlation ids that are decimal integers): an accumulator per sequence, set by the START
 * request's INPUT, added to by each later one, plus the correlation id at the END. OUTPUT is the
 * accumulator. */
const simpleStringDynaSequence: Model = {
  signature: sequenceSignature('simple_string_dyna_sequence'),
  sequenceBatching: dynaControls('BYTES'),
  execute (infer) {
    const sequence = infer.sequence as NonNullable<InferRequest['sequence']>
    const corrid = Number.parseInt(String(infer.input<BytesElements>('CORRID').data.at(0)), 10)
    if (Number.isNaN(corrid)) throw invalidRequest(`the correlation id '${String(sequence.correlationId)}' is not a decimal integer`)
    const input = first(infer, 'INPUT')
    let accumulator = first(infer, 'START') === 1 ? input : (sequence.state as number) + input
    if (first(infer, 'END') === 1) accumulator += corrid | 0
    sequence.state = accumulator | 0
    infer.output<Int32Array>('OUTPUT', [1, 1])[0] = first(infer, 'READY') * (sequence.state as number)
  }
}

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
    // Triton's QA identity_fp32 (L0_parameters' classification test): batches of up to 64.
    onnxModel(runner, 'identity_fp32.onnx', { name: 'identity_fp32', maxBatchSize: 64 }),
    onnxModel(runner, 'tiny_classifier.onnx', { name: 'tiny_classifier' })
  ])
  const models = [...onnxModels, simpleString, addSubFp32, simpleInt8, simpleSequence, simpleDynaSequence, simpleStringDynaSequence,
    ...decoupledModels(), mockLlm, ...identityModels(), ...decoupledEnsembles(), ...zeroEnsembles(), parameterModel, parametersEnsemble,
    ...optionalInputModels()]
  return new Map(models.map((model) => [model.signature.name, model]))
}

/** Runs a model, first waiting `delayMs` (to show that regions in use outlive their unregister).
 * A client that left meanwhile gets no run: its regions may be unmapped already. A model that runs
 * at once returns nothing to await: the model table then answers in the same turn. */
export function run (model: Model, infer: InferRequest, delayMs: number): Promise<void> | void {
  if (delayMs > 0) return sleep(delayMs).then(() => execute(model, infer))
  return execute(model, infer)
}

function execute (model: Model, infer: InferRequest): Promise<void> | void {
  infer.throwIfAbandoned()
  return model.execute?.(infer)
}
