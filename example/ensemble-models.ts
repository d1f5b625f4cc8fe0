/**
 * Triton's QA ensembles and the models their steps run: L0_decoupled's decoupled ensembles over
 * repeat_int32 and square_int32 (`simple_repeat`, `sequence_repeat`, `fan_repeat`,
 * `repeat_square`, `nested_square`), and L0_parameters' `ensemble` (its `identity`, then its
 * `parameter` model, which sees the request's parameters). Each is declared as Triton's
 * configuration declares it (platform `ensemble`, its steps' maps); the package's model table
 * runs it, decoupled where a step is.
 */
import type { EnsembleStep, TensorSpec } from '../lib/index'
import type { Model } from './model'

const int32 = (name: string, shape: number[]): TensorSpec => ({ name, datatype: 'INT32', shape })

/** The repeat backend's tensors: IN, DELAY, WAIT in; OUT (and IDX) out. */
const REPEAT_INPUTS: TensorSpec[] = [int32('IN', [-1]), { name: 'DELAY', datatype: 'UINT32', shape: [-1] }, { name: 'WAIT', datatype: 'UINT32', shape: [1] }]
const IDX: TensorSpec = { name: 'IDX', datatype: 'UINT32', shape: [1] }

/** The step that runs `model` on the ensemble's IN, DELAY and WAIT. */
const repeatStep = (model: string, outputMap: Record<string, string>): EnsembleStep =>
  ({ model, inputMap: { IN: 'IN', DELAY: 'DELAY', WAIT: 'WAIT' }, outputMap })

function ensemble (name: string, outputs: TensorSpec[], steps: EnsembleStep[]): Model {
  return {
    signature: { name, versions: ['1'], platform: 'ensemble', maxBatchSize: 0, inputs: REPEAT_INPUTS, outputs },
    settings: { ensembleScheduling: { steps } }
  }
}

/** The QA's libtorch_nobatch_int32_int32_int32 (its test.sh sets dims [ 1 ]), in JavaScript:
 * version 1 gives OUTPUT__0 = INPUT0 + INPUT1 and OUTPUT__1 = INPUT0 - INPUT1; versions 2 and 3
 * (the newest, which fan_repeat runs) the other way round. */
const addSub: Model = {
  signature: {
    name: 'libtorch_nobatch_int32_int32_int32',
    versions: ['1', '2', '3'],
    platform: 'node',
    maxBatchSize: 0,
    inputs: [int32('INPUT0', [1]), int32('INPUT1', [1])],
    outputs: [int32('OUTPUT__0', [1]), int32('OUTPUT__1', [1])]
  },
  execute (infer) {
    const a = infer.input<Int32Array>('INPUT0').data[0]
    const b = infer.input<Int32Array>('INPUT1').data[0]
    const swapped = infer.modelVersion !== '1'
    infer.output<Int32Array>('OUTPUT__0', [1])[0] = swapped ? a - b : a + b
    infer.output<Int32Array>('OUTPUT__1', [1])[0] = swapped ? a + b : a - b
  }
}

/** L0_decoupled's ensembles, and the add/sub model fan_repeat's last step runs. */
export function decoupledEnsembles (): Model[] {
  const out = [int32('OUT', [1])]
  return [
    addSub,
    ensemble('simple_repeat', [...out, IDX], [repeatStep('repeat_int32', { OUT: 'OUT', IDX: 'IDX' })]),
    ensemble('sequence_repeat', [...out, IDX], [
      repeatStep('repeat_int32', { OUT: 'repeat_out', IDX: 'IDX' }),
      { model: 'identity_int32', inputMap: { INPUT0: 'repeat_out' }, outputMap: { OUTPUT0: 'OUT' } }
    ]),
    ensemble('fan_repeat', out, [
      repeatStep('repeat_int32', { OUT: 'repeat_out' }),
      { model: 'identity_int32', inputMap: { INPUT0: 'repeat_out' }, outputMap: { OUTPUT0: 'identity_out' } },
      { model: 'libtorch_nobatch_int32_int32_int32', inputMap: { INPUT0: 'repeat_out', INPUT1: 'identity_out' }, outputMap: { OUTPUT__1: 'OUT' } }
    ]),
    ensemble('repeat_square', out, [
      repeatStep('repeat_int32', { OUT: 'repeat_out' }),
      { model: 'square_int32', inputMap: { IN: 'repeat_out' }, outputMap: { OUT: 'OUT' } }
    ]),
    ensemble('nested_square', out, [
      repeatStep('simple_repeat', { OUT: 'repeat_out' }),
      { model: 'square_int32', inputMap: { IN: 'repeat_out' }, outputMap: { OUT: 'OUT' } }
    ])
  ]
}

/** L0_parameters' `ensemble`: its `identity` (FP32 [1]), then `parameter`, which sees the
 * request's parameters as a request to the ensemble carries them. */
export const parametersEnsemble: Model = {
  signature: {
    name: 'ensemble',
    versions: ['1'],
    platform: 'ensemble',
    maxBatchSize: 0,
    inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1] }],
    outputs: [{ name: 'key', datatype: 'BYTES', shape: [-1] }, { name: 'value', datatype: 'BYTES', shape: [-1] }]
  },
  settings: {
    ensembleScheduling: {
      steps: [
        { model: 'identity', inputMap: { INPUT0: 'INPUT0' }, outputMap: { OUTPUT0: 'OUTPUT0' } },
        { model: 'parameter', inputMap: { INPUT0: 'OUTPUT0' }, outputMap: { key: 'key', value: 'value' } }
      ]
    }
  }
}

/** The step that runs the QA's nop model of `datatype` on `from` (as both its inputs), its OUTPUT0 to `to`. */
const nopStep = (datatype: string, from: string, to: string): EnsembleStep =>
  ({ model: `nop_TYPE_${datatype}_-1`, inputMap: { INPUT0: from, INPUT1: from }, outputMap: { OUTPUT0: to } })

/** Each zero ensemble's steps for pair `index` (emu.IdentityEnsembleSchedule): one nop, two in a
 * row, or three (the last QA calls them a fan). */
const ZERO_SCHEDULES: Record<string, (datatype: string, index: number) => EnsembleStep[]> = {
  simple: (datatype, index) => [nopStep(datatype, `INPUT${index}`, `OUTPUT${index}`)],
  sequence: (datatype, index) => [nopStep(datatype, `INPUT${index}`, `temp_${index}`), nopStep(datatype, `temp_${index}`, `OUTPUT${index}`)],
  fan: (datatype, index) => [
    nopStep(datatype, `INPUT${index}`, `temp_in_${index}`),
    nopStep(datatype, `temp_in_${index}`, `temp_out_${index}`),
    nopStep(datatype, `temp_out_${index}`, `OUTPUT${index}`)
  ]
}

/** L0_infer_zero's identity ensembles (gen_qa_identity_models.py's `--ensemble`): `<kind>_zero_<n>_<type>`
 * and `<kind>_zero_nobatch_zero_<n>_<type>` for kind simple, sequence and fan, bool with one pair,
 * float32 with one or three, over the identity backend's nop models: each OUTPUTi is INPUTi, any
 * size including 0. */
export function zeroEnsembles (): Model[] {
  const kinds: Array<[string, 'BOOL' | 'FP32', number]> = [['bool', 'BOOL', 1], ['float32', 'FP32', 1], ['float32', 'FP32', 3]]
  return Object.entries(ZERO_SCHEDULES).flatMap(([kind, schedule]) => kinds.flatMap(([typeName, datatype, pairs]) => [8, 0].map((maxBatchSize): Model => {
    // `[-1]`, after the batch dimension of a batching ensemble.
    const shape = maxBatchSize > 0 ? [-1, -1] : [-1]
    const tensors = (prefix: string): TensorSpec[] => Array.from({ length: pairs }, (_, index) => ({ name: `${prefix}${index}`, datatype, shape }))
    return {
      signature: {
        name: `${kind}_zero${maxBatchSize > 0 ? '' : '_nobatch'}_zero_${pairs}_${typeName}`,
        versions: ['1'],
        platform: 'ensemble',
        maxBatchSize,
        inputs: tensors('INPUT'),
        outputs: tensors('OUTPUT')
      },
      settings: { ensembleScheduling: { steps: Array.from({ length: pairs }, (_, index) => schedule(datatype, index)).flat() } }
    }
  })))
}
