/**
 * Optional inputs (a tensor's `optional`, Triton's `optional: true`) over HTTP and gRPC: a request
 * may leave them out and the model runs without them; one without a required input is refused in
 * Triton's words (its two forms: with and without optional inputs); the configuration shows them,
 * the metadata does not; the declarations the table refuses (labels on an input too).
 */
import { status } from '@grpc/grpc-js'
import t from 'tap'
import { type ModelDeclaration, ModelTable } from '../lib/index'
import type { ModelConfigResponse } from '../types'
import { grpcClient, serveModelTable } from './helpers/grpc'

const fp32 = (name: string, optional?: boolean) => ({ name, datatype: 'FP32' as const, shape: [-1], ...(optional !== undefined && { optional }) })

/** What `infer.input('INPUT3')` threw, for each request that left it out. */
const absent: unknown[] = []

/** OUTPUT0 = [the number of inputs sent, the sum of INPUT3 if it was]. */
const counting = (name: string, inputs: ModelDeclaration['inputs']): ModelDeclaration => ({
  name,
  inputs,
  outputs: [fp32('OUTPUT0')],
  run (infer) {
    const sent = infer.inputs.length
    const optional = infer.inputs.find(({ name }) => name === 'INPUT3')
    const out = infer.output<Float32Array>('OUTPUT0', [2])
    out.set([sent, optional === undefined ? -1 : (optional.data as Float32Array).reduce((sum, value) => sum + value, 0)])
    if (optional !== undefined) return
    try {
      infer.input('INPUT3')
    } catch (error) {
      absent.push(error)
    }
  }
})

const models = [
  counting('required', [fp32('INPUT0'), fp32('INPUT1'), fp32('INPUT2')]),
  counting('optional', [fp32('INPUT0'), fp32('INPUT1'), fp32('INPUT2'), fp32('INPUT3', true)]),
  counting('all_optional', [fp32('INPUT0', true), fp32('INPUT1', true), fp32('INPUT2', true)])
]

const input = (name: string, values: number[]) => ({ name, datatype: 'FP32', shape: [values.length], data: values })

t.test('optional inputs over HTTP and gRPC, and Triton\'s words for a request without a required one', async (t) => {
  const { app } = await serveModelTable(t, models)
  const infer = (model: string, inputs: object[]) => app.inject({ method: 'POST', url: `/v2/models/${model}/infer`, payload: { inputs } })
  const output = async (model: string, inputs: object[]) => (await infer(model, inputs)).json().outputs[0].data

  const three = [input('INPUT0', [1]), input('INPUT1', [1]), input('INPUT2', [1])]
  t.same(await output('optional', three), [3, -1], 'the optional input left out')
  t.same(await output('optional', [...three, input('INPUT3', [2, 3])]), [4, 5], 'and sent')
  t.same(await output('all_optional', []), [0, -1], 'no input at all')
  t.same(await output('required', three), [3, -1])
  t.match(absent, [{ code: 'ERR_SHM_NO_SUCH_INPUT', message: "the request for model 'optional' has no input 'INPUT3'" }, {}, {}],
    'an optional input left out is absent from the request')

  const refused = async (model: string, inputs: object[], message: string) => {
    const answer = await infer(model, inputs)
    t.same([answer.statusCode, answer.json()], [400, { error: message }], message)
  }
  await refused('required', [], "expected 3 inputs but got 0 inputs for model 'required'. Got input(s) [], but missing required input(s) " +
    "['INPUT0','INPUT1','INPUT2']. Please provide all required input(s).")
  await refused('optional', [input('INPUT0', [1])], "expected number of inputs between 3 and 4 but got 1 inputs for model 'optional'. " +
    "Got input(s) ['INPUT0'], but missing required input(s) ['INPUT1','INPUT2']. Please provide all required input(s).")
  await refused('optional', [input('INPUT3', [1]), input('INPUT1', [1]), input('INPUT0', [1])],
    "expected number of inputs between 3 and 4 but got 3 inputs for model 'optional'. Got input(s) ['INPUT0','INPUT1','INPUT3'], " +
    "but missing required input(s) ['INPUT2']. Please provide all required input(s).")
  await refused('optional', [...three, input('INPUT3', [1]), input('INPUT4', [1])], 'expected number of inputs between 3 and 4 but got 5 inputs for ' +
    "model 'optional'. Got input(s) ['INPUT0','INPUT1','INPUT2','INPUT3','INPUT4'], but missing required input(s) ]. Please provide all required input(s).")
  await refused('optional', [input('INPUT0', [1]), input('INPUT1', [1]), input('INPUT5', [1])], "unexpected inference input 'INPUT5' for model 'optional'")

  const grpc = grpcClient(t, app.tritonGrpc.port as number)
  const error = await grpc.fail('ModelInfer', { model_name: 'optional', inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1] }], raw_input_contents: [Buffer.alloc(4)] })
  t.same([error.code, error.details], [status.INVALID_ARGUMENT, "expected number of inputs between 3 and 4 but got 1 inputs for model 'optional'. " +
    "Got input(s) ['INPUT0'], but missing required input(s) ['INPUT1','INPUT2']. Please provide all required input(s)."])
  const none = await grpc.call('ModelInfer', { model_name: 'all_optional' })
  t.same(Array.from(new Float32Array(Uint8Array.from(none.raw_output_contents[0]).buffer)), [0, -1], 'over gRPC, no input at all')

  const config = (await app.inject('/v2/models/optional/config')).json() as ModelConfigResponse
  t.same(config.input.map(({ optional }) => optional), [false, false, false, true], 'the configuration shows which')
  t.same((await app.inject('/v2/models/optional')).json().inputs[3], { name: 'INPUT3', datatype: 'FP32', shape: [-1] }, 'the metadata does not')
})

t.test('declarations: only inputs are optional, only outputs have labels', async (t) => {
  t.throws(() => new ModelTable([{ ...models[0], inputs: [{ ...fp32('INPUT0'), labels: ['a'] }] }]),
    { code: 'ERR_SHM_INVALID_MODEL_DECLARATION', message: "fastify-triton-shm: model 'required': input 'INPUT0' has 'labels': only outputs have labels" })
  t.throws(() => new ModelTable([{ ...models[0], outputs: [fp32('OUTPUT0', true)] }]),
    { code: 'ERR_SHM_INVALID_MODEL_DECLARATION', message: "fastify-triton-shm: model 'required': output 'OUTPUT0' has 'optional': only inputs may be optional" })
  t.throws(() => new ModelTable([{ ...models[0], inputs: [{ ...fp32('INPUT0'), optional: 'yes' as unknown as boolean }] }]),
    { code: 'ERR_SHM_INVALID_MODEL_DECLARATION', message: /'inputs\/0\/optional' must be boolean|'inputs.0.optional' must be boolean/ })
})
