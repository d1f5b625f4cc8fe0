/**
 * L0_input_validation's models of optional inputs (Python models there): FP32 inputs of any
 * length, some of them optional (Triton's `optional: true`), and OUTPUT0 = [1] whatever was sent.
 * A request without a required input is refused before the model runs, in Triton's words.
 */
import type { Model } from './model'

function constantModel (name: string, inputs: Array<{ name: string, optional?: boolean }>): Model {
  return {
    signature: {
      name,
      versions: ['1'],
      platform: 'node',
      maxBatchSize: 0,
      inputs: inputs.map((input) => ({ ...input, datatype: 'FP32', shape: [-1] })),
      outputs: [{ name: 'OUTPUT0', datatype: 'FP32', shape: [1] }]
    },
    execute (infer) {
      infer.output<Float32Array>('OUTPUT0', [1])[0] = 1
    }
  }
}

const named = (count: number, optional: boolean) => Array.from({ length: count }, (_, index) => ({ name: `INPUT${index}`, optional }))

export function optionalInputModels (): Model[] {
  return [
    constantModel('input_all_required', named(3, false)),
    constantModel('input_optional', [...named(3, false), { name: 'INPUT3', optional: true }]),
    constantModel('input_all_optional', named(3, true))
  ]
}
