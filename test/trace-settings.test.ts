/**
 * Triton's trace extension's settings over real sockets, HTTP and gRPC from one app and one
 * table: defaults, global and per-model changes, clearing, Triton's checks and texts on both
 * transports, the `trace` restricted category, and settings shared by the processes of a store.
 */
import Fastify from 'fastify'
import t, { type Test } from 'tap'
import fastifyTritonShm, { DEFAULT_TRACE_VALUES, kserveModels, type ModelDeclaration, ModelTable, type ModelTableOptions, Registry } from '../lib/index'
import type { FastifyTritonShmOptions, KServeModelsOptions } from '../lib/index'
import { grpcClient } from './helpers/grpc'
import { storePath } from './helpers/registry-peer'

const tensor = (name: string) => ({ name, datatype: 'INT32' as const, shape: [1] })
const model = (name: string): ModelDeclaration => ({ name, inputs: [tensor('INPUT0')], outputs: [tensor('OUTPUT0')], run () {} })

const STARTED = { level: ['TIMESTAMPS' as const], rate: 1, file: 'global.log' }

async function serve (t: Test, options: ModelTableOptions = { trace: STARTED }, plugin: FastifyTritonShmOptions = {},
  models: Partial<KServeModelsOptions> = {}) {
  const table = new ModelTable([model('simple'), { ...model('idle'), ready: false }], options)
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(fastifyTritonShm, { ...plugin, grpc: { port: 0, models: table, ...plugin.grpc } })
  await app.register(kserveModels, { models: table, ...models })
  const url = await app.listen({ host: '127.0.0.1', port: 0 })
  const http = async (path: string, body?: string, headers: Record<string, string> = {}) => {
    const response = await fetch(url + path, { method: body === undefined ? 'GET' : 'POST', body, headers })
    return { status: response.status, body: await response.json() }
  }
  return { table, http, grpc: grpcClient(t, app.tritonGrpc.port as number) }
}

const settings = (changes: Record<string, string | string[]> = {}) => ({
  trace_level: ['TIMESTAMPS'], trace_rate: '1', trace_count: '-1', log_frequency: '0', trace_file: 'global.log', trace_mode: 'triton', ...changes
})

/** HTTP settings as gRPC answers them. */
const grpcSettings = (values: Record<string, string | string[]>) => ({
  settings: Object.fromEntries(Object.entries(values).map(([name, value]) => [name, { value: typeof value === 'string' ? [value] : value }]))
})

t.test('defaults are Triton\'s: tracing off, rate 1000, no file', async (t) => {
  const { http, grpc } = await serve(t, {})
  const expected = { trace_level: ['OFF'], trace_rate: '1000', trace_count: '-1', log_frequency: '0', trace_file: '', trace_mode: 'triton' }
  t.same(await http('/v2/trace/setting'), { status: 200, body: expected })
  t.same(await grpc.call('TraceSetting', {}), grpcSettings(expected))
  t.same(DEFAULT_TRACE_VALUES, { level: [], rate: 1000, count: -1, logFrequency: 0, file: '', mode: 'triton' })
  t.same((await http('/v2/trace/setting', JSON.stringify({ trace_level: ['TIMESTAMPS'] }))).body,
    { error: 'Attempting to set invalid trace setting :trace file name is not given' }, 'no file: tracing cannot start')
})

t.test('HTTP: a model falls back to the global settings for what it does not set, and null clears', async (t) => {
  const { http } = await serve(t, { trace: { ...STARTED, level: ['TENSORS', 'TIMESTAMPS'] } })
  t.same(await http('/v2/models/simple/trace/setting'), { status: 200, body: settings({ trace_level: ['TIMESTAMPS', 'TENSORS'] }) }, 'in Triton\'s order')
  t.same(await http('/v2/models/simple/trace/setting', JSON.stringify({ trace_rate: '12', log_frequency: '34' })),
    { status: 200, body: settings({ trace_level: ['TIMESTAMPS', 'TENSORS'], trace_rate: '12', log_frequency: '34' }) })
  t.same(await http('/v2/trace/setting', JSON.stringify({ trace_rate: '56', trace_count: '78', trace_level: ['OFF'] })),
    { status: 200, body: settings({ trace_level: ['OFF'], trace_rate: '56', trace_count: '78' }) })
  t.same((await http('/v2/models/simple/trace/setting')).body, settings({ trace_level: ['OFF'], trace_rate: '12', trace_count: '78', log_frequency: '34' }),
    'the model follows the global change for what it does not set')
  t.same((await http('/v2/trace/setting', JSON.stringify({ trace_rate: null, trace_count: null }))).body, settings({ trace_level: ['OFF'] }),
    'a cleared global setting is the one the server started with')
  t.same((await http('/v2/models/simple/trace/setting', JSON.stringify({ trace_rate: null, trace_level: null }))).body,
    settings({ trace_level: ['OFF'], log_frequency: '34' }))
  t.same((await http('/v2/models/simple/trace/setting', JSON.stringify({ log_frequency: null }))).body, settings({ trace_level: ['OFF'] }),
    'nothing set: the global settings')
  t.same((await http('/v2/models/simple/trace/setting', '')).body, settings({ trace_level: ['OFF'] }), 'an empty body changes nothing')
  t.same((await http('/v2/trace/setting', JSON.stringify({ trace_level: ['BOGUS'] }))).body, settings({ trace_level: ['OFF'] }),
    'an unknown level is ignored, as Triton ignores it')
})

t.test('gRPC: the same settings, an empty list clearing one', async (t) => {
  const { grpc, http } = await serve(t)
  const call = (request: object) => grpc.call('TraceSetting', request)
  t.same(await call({ model_name: 'simple', settings: { trace_rate: { value: ['12'] }, log_frequency: { value: ['34'] } } }),
    grpcSettings(settings({ trace_rate: '12', log_frequency: '34' })))
  t.same(await call({ settings: { trace_level: { value: ['TIMESTAMPS', 'TENSORS'] }, trace_count: { value: ['5'] } } }),
    grpcSettings(settings({ trace_level: ['TIMESTAMPS', 'TENSORS'], trace_count: '5' })))
  t.same((await http('/v2/models/simple/trace/setting')).body,
    settings({ trace_level: ['TIMESTAMPS', 'TENSORS'], trace_count: '5', trace_rate: '12', log_frequency: '34' }), 'one table: HTTP sees it')
  t.same(await call({ model_name: 'simple', settings: { trace_rate: { value: [] } } }),
    grpcSettings(settings({ trace_level: ['TIMESTAMPS', 'TENSORS'], trace_count: '5', log_frequency: '34' })))
  t.same(await call({ settings: { trace_level: { value: [] }, trace_count: { value: [] } } }), grpcSettings(settings()))
  t.same(await call({ model_name: 'simple' }), grpcSettings(settings({ log_frequency: '34' })), 'no settings: a read')
})

t.test('refusals, in Triton\'s words on each transport, change nothing', async (t) => {
  const { http, grpc } = await serve(t)
  const refusals: Array<[body: object | string, status: number, message: string]> = [
    [{ trace_file: 'other.log' }, 501, 'trace file location can not be updated through network protocol'],
    [{ trace_rate: '2', trace_file: null }, 501, 'trace file location can not be updated through network protocol'],
    [{ trace_level: ['OFF', 'TIMESTAMPS'] }, 400, "Expect only one trace level 'OFF' is specified"],
    [{ trace_level: 'TIMESTAMPS' }, 400, 'attempt to access JSON non-array as array'],
    [{ trace_level: [1] }, 400, 'attempt to access JSON non-string as string'],
    [{ trace_rate: 5 }, 400, 'attempt to access JSON non-string as string'],
    [{ trace_rate: 'five' }, 400, "Unable to parse 'trace_rate', got: five"],
    [{ log_frequency: '99999999999' }, 400, "Unable to parse 'log_frequency', value is out of range [ 0, 4294967295 ], got: 99999999999"],
    [{ trace_count: '-2' }, 400, "Unable to parse 'trace_count'. Expecting value >= -1, got:-2"],
    [{ trace_count: '3000000000' }, 400, "Unable to parse 'trace_count', value is out of range [ -1, 2147483647 ], got: 3000000000"],
    [{ trace_rate: '0' }, 400, 'Attempting to set invalid trace setting :sample rate must be non-zero'],
    [{ trace_count: '0' }, 400, 'Attempting to set invalid trace setting :'],
    ['[]', 400, 'failed to parse the request JSON buffer: the body must be a JSON object'],
    ['{', 400, 'failed to parse the request JSON buffer: '],
    [{ trace_rate: '2', trace_count: 'x' }, 400, "Unable to parse 'trace_count', got: x"]
  ]
  for (const [body, status, message] of refusals) {
    const response = await http('/v2/trace/setting', typeof body === 'string' ? body : JSON.stringify(body))
    t.equal(response.status, status, JSON.stringify(body))
    t.match(response.body.error, message.endsWith(': ') ? new RegExp(`^${message}`) : message, JSON.stringify(body))
  }
  t.same((await http('/v2/trace/setting')).body, settings(), 'nothing changed')

  const fails = async (request: object, code: number, details: string) => {
    const error = await grpc.fail('TraceSetting', request)
    t.same([error.code, error.details], [code, details], JSON.stringify(request))
  }
  await fails({ settings: { trace_file: { value: ['x'] } } }, 12, 'trace file location can not be updated through network protocol')
  await fails({ settings: { trace_rate: { value: ['1', '2'] } } }, 3, "expect only 1 value for 'trace_rate'")
  await fails({ settings: { trace_count: { value: ['-5'] } } }, 3, "Unable to parse 'trace_count'. Expecting value >= -1, got: -5")
  await fails({ settings: { trace_level: { value: ['TIMESTAMPS', 'OFF'] } } }, 3, "Expect only one trace level 'OFF' is specified")
  await fails({ model_name: 'simple', settings: { trace_rate: { value: ['0'] } } }, 3, 'Attempting to set invalid trace setting :sample rate must be non-zero')
  t.same(await grpc.call('TraceSetting', { model_name: 'simple' }), grpcSettings(settings()), 'nothing changed')
})

t.test('numbers are read as Triton\'s std::stoi reads them', async (t) => {
  const { http } = await serve(t)
  t.same((await http('/v2/trace/setting', JSON.stringify({ trace_rate: ' 7abc', log_frequency: '-1' }))).body,
    settings({ trace_rate: '7', log_frequency: '4294967295' }), 'a leading integer; a negative unsigned wraps around')
})

t.test('a global change that would leave a model tracing nothing is refused whole', async (t) => {
  const { http } = await serve(t)
  await http('/v2/models/simple/trace/setting', JSON.stringify({ trace_level: ['TIMESTAMPS'] }))
  await http('/v2/trace/setting', JSON.stringify({ trace_level: ['OFF'] }))
  const refused = await http('/v2/trace/setting', JSON.stringify({ trace_rate: '0' }))
  t.same(refused, { status: 400, body: { error: 'Attempting to set invalid trace setting :sample rate must be non-zero' } })
  t.same((await http('/v2/trace/setting')).body, settings({ trace_level: ['OFF'] }), 'the global settings as they were')
})

t.test('a model that is unknown or not ready: Triton\'s text, before the body is read', async (t) => {
  const { http, grpc } = await serve(t)
  for (const name of ['does-not-exist', 'idle']) {
    const expected = { status: 400, body: { error: `Request for unknown model : ${name}` } }
    t.same(await http(`/v2/models/${name}/trace/setting`), expected)
    t.same(await http(`/v2/models/${name}/trace/setting`, '{'), expected)
    const error = await grpc.fail('TraceSetting', { model_name: name, settings: { trace_file: { value: [] } } })
    t.same([error.code, error.details], [3, `Request for unknown model : ${name}`])
  }
})

t.test('the trace category restricted on each transport', async (t) => {
  const { http, grpc } = await serve(t, { trace: STARTED },
    { grpc: { port: 0, restrictedProtocols: [{ categories: ['trace'], header: 'trace-key', value: 'secret' }] } },
    { restrictedApis: [{ categories: ['trace'], header: 'trace-key', value: 'secret' }] })
  t.same(await http('/v2/trace/setting'), { status: 403, body: { error: "This API is restricted, expecting header 'trace-key'" } })
  t.same(await http('/v2/models/simple/trace/setting', '{}'), { status: 403, body: { error: "This API is restricted, expecting header 'trace-key'" } })
  t.same((await http('/v2/trace/setting', undefined, { 'trace-key': 'secret' })).status, 200)
  const refused = await grpc.fail('TraceSetting', {})
  t.same([refused.code, refused.details], [14, "This protocol is restricted, expecting header 'trace-key'"])
  t.same(await grpc.call('TraceSetting', {}, { 'trace-key': 'secret' }), grpcSettings(settings()))
})

t.test('the table\'s trace options are checked', async (t) => {
  t.throws(() => new ModelTable([model('simple')], { trace: { rate: -1 } }), { code: 'ERR_SHM_INVALID_OPTION' })
  t.throws(() => new ModelTable([model('simple')], { trace: { level: ['OFF' as 'TIMESTAMPS'] } }), { code: 'ERR_SHM_INVALID_OPTION' })
})

t.test('with a shared registry, a change through one process applies in every process; a refused one in none', async (t) => {
  const store = storePath(t)
  const [one, two] = [0, 1].map(() => {
    const registry = new Registry({ sharedRegistry: { path: store, checkIntervalMs: 1000 } })
    t.teardown(() => registry.close())
    const table = new ModelTable([model('simple')], { trace: STARTED })
    table.serveWith(registry)
    return table
  })
  one.updateTraceSettings(undefined, { rate: 5, level: ['TIMESTAMPS', 'TENSORS'] })
  t.same(two.traceSettings(), { ...STARTED, level: ['TIMESTAMPS', 'TENSORS'], rate: 5, count: -1, logFrequency: 0, mode: 'triton' })
  two.updateTraceSettings('simple', { count: 3 })
  t.equal(one.traceSettings('simple').count, 3, 'a model\'s setting, made in the other process')
  t.equal(one.traceSettings('simple').rate, 5)
  t.throws(() => two.updateTraceSettings(undefined, { rate: 0 }), { code: 'ERR_SHM_INVALID_TRACE_SETTING' })
  t.equal(one.traceSettings().rate, 5, 'the refused change reached no process')
  one.updateTraceSettings('simple', { count: null })
  t.equal(two.traceSettings('simple').count, -1, 'cleared everywhere')
})

t.test('an empty model name over HTTP is the global setting, as over gRPC', async (t) => {
  const { http } = await serve(t)
  t.same(await http('/v2/models//trace/setting'), { status: 200, body: settings() })
})

t.test('a settings body past 64 KiB is refused before it is parsed', async (t) => {
  const { http } = await serve(t)
  const response = await http('/v2/trace/setting', JSON.stringify({ trace_rate: '2', pad: 'x'.repeat(64 * 1024) }))
  t.equal(response.status, 413)
  t.same((await http('/v2/trace/setting')).body, settings(), 'nothing changed')
})
