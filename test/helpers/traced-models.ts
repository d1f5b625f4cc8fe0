/**
 * The models the tracing tests trace: `echo` (two versions; it fails on a negative first
 * number), an ensemble of two echoes, and an ensemble of that one.
 */
import type { InferRequest, ModelDeclaration } from '../../lib/index'

export const tensor = (name: string) => ({ name, datatype: 'INT32' as const, shape: [-1] })

/** echo's run: its output is its input; it fails on a negative first number. */
export function runEcho (infer: InferRequest): void {
  const { data, shape } = infer.input<Int32Array>('INPUT0')
  // eslint-disable-next-line no-throw-literal -- a model may throw anything
  if (data[0] === -2) throw 'a text thrown'
  if (data[0] < 0) throw new Error('the model failed')
  infer.output<Int32Array>('OUTPUT0', shape).set(data)
}

export const echo: ModelDeclaration = {
  name: 'echo',
  versions: ['1', '3'],
  inputs: [tensor('INPUT0')],
  outputs: [tensor('OUTPUT0')],
  run: runEcho
}

/** echo, then echo again, as one ensemble. */
export const pair: ModelDeclaration = {
  name: 'pair',
  inputs: [tensor('INPUT0')],
  outputs: [tensor('OUTPUT0')],
  ensembleScheduling: {
    steps: [
      { model: 'echo', inputMap: { INPUT0: 'INPUT0' }, outputMap: { OUTPUT0: 'middle' } },
      { model: 'echo', inputMap: { INPUT0: 'middle' }, outputMap: { OUTPUT0: 'OUTPUT0' } }
    ]
  }
}

/** An ensemble of the ensemble above. */
export const outer: ModelDeclaration = {
  name: 'outer',
  inputs: [tensor('INPUT0')],
  outputs: [tensor('OUTPUT0')],
  ensembleScheduling: { steps: [{ model: 'pair', inputMap: { INPUT0: 'INPUT0' }, outputMap: { OUTPUT0: 'OUTPUT0' } }] }
}
