/**
 * A request's parameters reach its model (`infer.parameters`), over HTTP and gRPC, as Triton passes
 * them to its backends: all but those the server takes for itself; a value of a type Triton does
 * not take is refused in its words.
 */
import { status } from '@grpc/grpc-js'
import Fastify from 'fastify'
import t from 'tap'
import fastifyTritonShm, { kserveModels, type ModelDeclaration, ModelTable } from '../lib/index'
import { grpcClient } from './helpers/grpc'
import { bool, int64, string } from './helpers/stream'

/** Answers the parameters it was given, as JSON in one BYTES element. */
const echoParameters: ModelDeclaration = {
  name: 'parameters',
  inputs: [],
  outputs: [{ name: 'JSON', datatype: 'BYTES', shape: [1] }],
  run (infer) {
    infer.output<Buffer[]>('JSON', [1])[0] = Buffer.from(JSON.stringify(infer.parameters))
  }
}

t.test('the model\'s parameters of a request, over HTTP and gRPC', async (t) => {
  const table = new ModelTable([echoParameters])
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(fastifyTritonShm, { grpc: { port: 0, models: table } })
  await app.register(kserveModels, { models: table })
  await app.ready()
  const overHttp = async (parameters: object) => {
    const answer = await app.inject({ method: 'POST', url: '/v2/models/parameters/infer', payload: { parameters, inputs: [] } })
    return answer.statusCode === 200 ? JSON.parse(answer.json().outputs[0].data[0]) : answer.json()
  }
  t.same(await overHttp({}), {}, 'none')
  t.same(await overHttp({ key: 'value', count: 2, ratio: 0.5, on: true, sequence_id: 0, priority: 1, timeout: 100, binary_data_output: false }),
    { key: 'value', count: 2, ratio: 0.5, on: true }, 'all but those the server takes for itself')
  t.same(await overHttp({ nested: { a: 1 } }), { error: "parameter 'nested' has invalid type. It should be either 'int', 'bool', or 'string'." })
  t.same(await overHttp({ list: [1] }), { error: "parameter 'list' has invalid type. It should be either 'int', 'bool', or 'string'." })
  t.same(await overHttp({ triton_mine: 1 }), { error: "parameter keys starting with 'triton_' are reserved for Triton usage and should not be specified." })

  const grpc = grpcClient(t, app.tritonGrpc.port as number)
  const overGrpc = async (parameters: object) => {
    const answer = await grpc.call('ModelInfer', { model_name: 'parameters', parameters })
    return JSON.parse(Buffer.from(answer.raw_output_contents[0]).subarray(4).toString())
  }
  t.same(await overGrpc({
    key: string('value'),
    count: int64(-2),
    ratio: { double_param: 0.25 },
    on: bool(false),
    sequence_id: int64(0),
    sequence_start: bool(false),
    priority: int64(1),
    timeout: int64(5),
    triton_enable_empty_final_response: bool(true)
  }), { key: 'value', count: -2, ratio: 0.25, on: false }, 'typed, all but the server\'s own')
  for (const parameter of [{ uint64_param: 1 }, {}]) {
    const error = await grpc.fail('ModelInfer', { model_name: 'parameters', parameters: { odd: parameter } })
    t.same([error.code, error.details], [status.INVALID_ARGUMENT, "invalid value type for 'odd' parameter, expected int64_param, bool_param, or string_param."])
  }
})
