/**
 * L0_parameters' `parameter` model (a Python model there): INPUT0 (FP32 [1]) in, and out, as BYTES,
 * the request's parameters that reach the model (`infer.parameters`): `key` their names, `value`
 * their values, as the Python model's str() writes them (booleans `True` and `False`).
 */
import type { Model } from './model'

const text = (value: string | number | boolean) => typeof value === 'boolean' ? (value ? 'True' : 'False') : String(value)

export const parameterModel: Model = {
  signature: {
    name: 'parameter',
    versions: ['1'],
    platform: 'node',
    maxBatchSize: 0,
    inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1] }],
    outputs: [{ name: 'key', datatype: 'BYTES', shape: [-1] }, { name: 'value', datatype: 'BYTES', shape: [-1] }]
  },
  execute (infer) {
    const entries = Object.entries(infer.parameters)
    const keys = infer.output<Buffer[]>('key', [entries.length])
    const values = infer.output<Buffer[]>('value', [entries.length])
    entries.forEach(([key, value], index) => {
      keys[index] = Buffer.from(key)
      values[index] = Buffer.from(text(value))
    })
  }
}
