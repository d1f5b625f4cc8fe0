/**
 * The health, metadata, configuration and statistics RPCs over a real gRPC connection, from the
 * model table the HTTP routes use; RPCs this package does not serve answer UNIMPLEMENTED.
 */
import { status } from '@grpc/grpc-js'
import t, { type Test } from 'tap'
import { inferenceServiceHandlers } from '../lib/grpc'
import { Registry } from '../lib/index'
import { SERVER_EXTENSIONS } from '../lib/index'
import { grpcClient, modelTable, rawGrpcClient, startServer } from './helpers/grpc'
import { sumModel } from './helpers/kserve'

async function setup (t: Test) {
  const registry = new Registry()
  t.teardown(() => registry.close())
  const models = modelTable([{ ...sumModel(), signature: { ...sumModel().signature, versions: ['1', '2'], maxBatchSize: 8 } }])
  const port = await startServer(t, inferenceServiceHandlers({ registry, models, server: { name: 'test-server', version: '9.9.9' } }))
  return { models, port, client: grpcClient(t, port) }
}

const int32 = (values: number[]) => Buffer.from(Int32Array.from(values).buffer)

t.test('health and server metadata', async (t) => {
  const { models, client } = await setup(t)
  t.same(await client.call('ServerLive'), { live: true })
  t.same(await client.call('ServerReady'), { ready: true })
  t.same(await client.call('ServerMetadata'), { name: 'test-server', version: '9.9.9', extensions: [...SERVER_EXTENSIONS] },
    'the extensions, shared memory among them')
  t.ok(SERVER_EXTENSIONS.includes('system_shared_memory'))
  t.same(await client.call('ModelReady', { name: 'simple' }), { ready: true })
  models.setReady('simple', '2', false)
  t.same(await client.call('ModelReady', { name: 'simple', version: '2' }), { ready: false }, 'a version taken out of service')
  const unknown = await client.fail('ModelReady', { name: 'nothing' })
  t.equal(unknown.code, status.NOT_FOUND)
  t.equal(unknown.details, "Request for unknown model: 'nothing' is not found")
})

t.test('model metadata and configuration, as the table gives them to HTTP', async (t) => {
  const { models, client } = await setup(t)
  const metadata = await client.call('ModelMetadata', { name: 'simple' })
  const expected = models.metadata('simple')
  t.same(metadata, {
    ...expected,
    inputs: expected.inputs.map(({ name, datatype, shape }) => ({ name, datatype, shape: shape.map(String) })),
    outputs: expected.outputs.map(({ name, datatype, shape }) => ({ name, datatype, shape: shape.map(String) }))
  }, 'the same metadata, int64 shapes as strings')
  const { config } = await client.call('ModelConfig', { name: 'simple', version: '1' })
  t.match(config, {
    name: 'simple',
    max_batch_size: 8,
    version_policy: { specific: { versions: ['1', '2'] } },
    input: [{ name: 'INPUT0', data_type: 'TYPE_INT32', format: 'FORMAT_NONE', dims: ['16'] }, { name: 'INPUT1' }],
    output: [{ name: 'OUTPUT0', data_type: 'TYPE_INT32', dims: ['16'] }, { name: 'OUTPUT1' }],
    instance_group: [{ kind: 'KIND_CPU', count: 1 }],
    model_transaction_policy: { decoupled: false },
    response_cache: { enable: false }
  }, 'enums as names, the batch dimension left out')
  const invalid = await client.fail('ModelConfig', { name: 'simple', version: 'x' })
  t.equal(invalid.code, status.INVALID_ARGUMENT, 'a version that is no number')
})

t.test('statistics count gRPC inferences', async (t) => {
  const { client } = await setup(t)
  const before = await client.call('ModelStatistics', {})
  t.same(before.model_stats.map(({ name, version }: { name: string, version: string }) => `${name}/${version}`), ['simple/1', 'simple/2'])
  const input = (name: string) => ({ name, datatype: 'INT32', shape: [2, 16] })
  await client.call('ModelInfer', { model_name: 'simple', inputs: [input('INPUT0'), input('INPUT1')], raw_input_contents: [int32(new Array(32).fill(1)), int32(new Array(32).fill(2))] })
  const { model_stats: [stats] } = await client.call('ModelStatistics', { name: 'simple', version: '2' })
  t.match(stats, { name: 'simple', version: '2', inference_count: '2', execution_count: '1', inference_stats: { success: { count: '1' }, queue: { count: '1' } } },
    'the newest version served it, counted per batch element')
  t.same(stats.batch_stats.map((entry: { batch_size: string }) => entry.batch_size), ['2'])
})

t.test('every response names the version that ran: resolved once, by the table', async (t) => {
  const registry = new Registry()
  t.teardown(() => registry.close())
  const models = modelTable([
    { ...sumModel(), signature: { ...sumModel().signature, versions: ['1', '2'] } },
    { ...sumModel(), signature: { ...sumModel().signature, name: 'numeric', versions: ['10', '2'] } }
  ])
  models.setReady('simple', '2', false)
  const port = await startServer(t, inferenceServiceHandlers({ registry, models, server: { name: 'test-server', version: '' } }))
  const client = grpcClient(t, port)
  const infer = async (model: string, version = '') => {
    const input = (name: string) => ({ name, datatype: 'INT32', shape: [1, 16] })
    const inputs = [input('INPUT0'), input('INPUT1')]
    return (await client.call('ModelInfer', { model_name: model, model_version: version, inputs, raw_input_contents: [int32(new Array(16).fill(1)), int32(new Array(16).fill(2))] })).model_version
  }
  t.equal(await infer('simple'), '1', 'version 2 is not ready: 1 ran, and the response says 1')
  t.equal(await infer('numeric'), '10', 'the newest by number, not the last listed')
  t.equal(await infer('numeric', '2'), '2', 'the version asked for')
  t.equal(await infer('numeric', '0010'), '10', 'asked for 0010: version 10 ran, named as the table names it')
  const notReady = await client.fail('ModelInfer', { model_name: 'simple', model_version: '2', inputs: [] })
  t.equal(notReady.code, status.UNAVAILABLE, 'asked for the version that is not ready')
})

t.test('RPCs this package does not serve answer UNIMPLEMENTED', async (t) => {
  const { port } = await setup(t)
  const methods = ['RepositoryIndex', 'LogSettings']
  const call = rawGrpcClient(t, port, methods)
  for (const name of methods) {
    const error = await call(name, Buffer.alloc(0))
    t.equal(error?.code, status.UNIMPLEMENTED, name)
  }
})
