/**
 * Triton's logging extension over both transports (`GET/POST /v2/logging`, gRPC `LogSettings`),
 * on a real Fastify app whose pino logger writes to the test's own destination: Triton's settings
 * and defaults, a change over one transport seen by the other and by the logger (what the app
 * writes changes), each refusal in Triton's words with nothing changed, the `logging` restricted
 * category on each transport, and nothing served without the option.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import Fastify, { type FastifyInstance, type LightMyRequestResponse } from 'fastify'
import { status } from '@grpc/grpc-js'
import t, { type Test } from 'tap'
import fastifyTritonShm, { kserveModels, ModelTable, pinoLevelOf, Registry, type RestrictionGroup, ServerLogging, TRITON_LOG_SETTINGS } from '../lib/index'
import type { LogSettingValue } from '../types/grpc'
import { type GrpcClient, grpcClient } from './helpers/grpc'
import { LogCapture } from './helpers/observe'

const DEFAULTS = { log_file: '', log_info: true, log_warning: true, log_error: true, log_verbose_level: 0, log_format: 'default' }

interface Served {
  app: FastifyInstance
  grpc: GrpcClient
  capture: LogCapture
  logging?: ServerLogging
}

interface ServeOptions {
  level?: string
  logging?: boolean
  restrictedApis?: RestrictionGroup[]
  restrictedProtocols?: RestrictionGroup[]
}

/** An app serving the model endpoints and gRPC, with the logging extension over its logger unless `logging` is false. */
async function serve (t: Test, { level = 'info', logging: served = true, restrictedApis, restrictedProtocols }: ServeOptions = {}): Promise<Served> {
  const capture = new LogCapture()
  const app = Fastify({ logger: { level, stream: capture.stream } })
  t.teardown(() => app.close())
  const logging = served ? new ServerLogging(app.log) : undefined
  const table = new ModelTable([])
  await app.register(fastifyTritonShm, { grpc: { port: 0, models: table, ...(logging !== undefined && { logging }), ...(restrictedProtocols !== undefined && { restrictedProtocols }) } })
  await app.register(kserveModels, { models: table, ...(logging !== undefined && { logging }), ...(restrictedApis !== undefined && { restrictedApis }) })
  await app.ready()
  return { app, grpc: grpcClient(t, app.tritonGrpc.port as number), capture, logging }
}

const get = (app: FastifyInstance, headers: Record<string, string> = {}) => app.inject({ method: 'GET', url: '/v2/logging', headers })
const post = (app: FastifyInstance, body: unknown) =>
  app.inject({ method: 'POST', url: '/v2/logging', payload: typeof body === 'string' ? body : JSON.stringify(body) })

/** A gRPC answer's settings as the HTTP face names them: each value from the `parameter_choice` it came in. */
function fromGrpc ({ settings }: { settings: Record<string, LogSettingValue> }): Record<string, unknown> {
  return Object.fromEntries(Object.entries(settings).map(([name, value]) => [name, value[value.parameter_choice as keyof LogSettingValue]]))
}

const bool = (value: boolean) => ({ bool_param: value })
const uint = (value: number) => ({ uint32_param: value })
const text = (value: string) => ({ string_param: value })

function errorOf (t: Test, response: LightMyRequestResponse, statusCode: number): string {
  t.equal(response.statusCode, statusCode, response.body)
  return (response.json() as { error: string }).error
}

t.test('both transports answer Triton\'s settings and list the extension', async (t) => {
  const { app, grpc } = await serve(t)
  const response = await get(app)
  t.equal(response.statusCode, 200)
  t.same(Object.keys(response.json()), Object.keys(DEFAULTS), 'every setting, in Triton\'s order')
  t.same(response.json(), DEFAULTS)
  const answer = await grpc.call('LogSettings', {})
  t.same(fromGrpc(answer), DEFAULTS)
  t.same(Object.fromEntries(Object.entries(answer.settings as Record<string, LogSettingValue>).map(([name, value]) => [name, value.parameter_choice])), {
    log_file: 'string_param', log_info: 'bool_param', log_warning: 'bool_param', log_error: 'bool_param', log_verbose_level: 'uint32_param', log_format: 'string_param'
  }, 'each in its own parameter_choice, as Triton answers')
  t.equal((await app.inject('/v2')).json().extensions.at(-1), 'logging', 'listed last, as Triton lists it')
  t.equal((await grpc.call('ServerMetadata')).extensions.at(-1), 'logging')
})

t.test('a change over one transport is the other\'s, and changes what the app logs', async (t) => {
  const { app, grpc, capture } = await serve(t)
  const logged = (level: 'debug' | 'info' | 'warn' | 'error', msg: string) => {
    app.log[level](msg)
    return capture.withMessage(msg).length === 1
  }
  t.ok(logged('info', 'info before'))
  t.notOk(logged('debug', 'debug before'))

  const changed = await post(app, { log_info: false, log_format: 'ISO8601', unknown_setting: 1 })
  t.equal(changed.statusCode, 200)
  t.same(changed.json(), { ...DEFAULTS, log_info: false, log_format: 'ISO8601' }, 'only the settings named change; others are ignored, as Triton ignores them')
  t.same(fromGrpc(await grpc.call('LogSettings', {})), changed.json(), 'gRPC answers the change')
  t.equal(app.log.level, 'warn')
  t.notOk(logged('info', 'info off'), 'info is off')
  t.ok(logged('warn', 'warning on'))
  capture.clear()
  await app.inject('/v2/health/live')
  t.same(capture.lines.filter((line) => line.reqId !== undefined), [], 'requests\' loggers follow: no request lines at info')

  const verbose = await grpc.call('LogSettings', { settings: { log_verbose_level: uint(1), log_warning: bool(false), log_error: bool(true), log_format: text('ISO8601') } })
  t.same(fromGrpc(verbose), { ...DEFAULTS, log_info: false, log_warning: false, log_verbose_level: 1, log_format: 'ISO8601' })
  t.same((await get(app)).json(), fromGrpc(verbose), 'HTTP answers the change')
  t.equal(app.log.level, 'debug', 'verbose level 1 is debug')
  t.ok(logged('debug', 'verbose on'))

  await post(app, { log_verbose_level: 7 })
  t.equal(app.log.level, 'trace', '2 and above are trace')
  await post(app, { log_verbose_level: 0, log_error: false, log_info: null })
  t.equal(app.log.level, 'fatal', 'everything off: fatal only')
  t.notOk(logged('error', 'error off'))
  t.same((await post(app, { log_info: true, log_warning: true, log_error: true, log_format: 'default' })).json(), DEFAULTS, 'back to Triton\'s defaults')
  t.equal(app.log.level, 'info')
  t.match((await grpc.call('LogSettings', { settings: { log_info: bool(true) } })).settings.log_info, { parameter_choice: 'bool_param', bool_param: true })
})

t.test('HTTP refuses what Triton refuses, in its words, and changes nothing', async (t) => {
  const { app } = await serve(t)
  const refusals: Array<[unknown, number, string]> = [
    [{ log_file: 'log_file.log', log_info: false }, 501, 'log file location can not be updated through network protocol'],
    [{ log_file: '', log_info: false }, 501, 'log file location can not be updated through network protocol'],
    [{ log_info: 'false' }, 400, 'attempt to access JSON non-boolean as boolean'],
    [{ log_info: false, log_warning: 0 }, 400, 'attempt to access JSON non-boolean as boolean'],
    [{ log_info: false, log_error: [] }, 400, 'attempt to access JSON non-boolean as boolean'],
    [{ log_info: false, log_verbose_level: -1 }, 400, 'attempt to access JSON non-unsigned-integer as unsigned-integer'],
    [{ log_verbose_level: 1.5 }, 400, 'attempt to access JSON non-unsigned-integer as unsigned-integer'],
    [{ log_verbose_level: 2 ** 32 }, 400, 'attempt to access JSON non-unsigned-integer as unsigned-integer'],
    [{ log_verbose_level: '1' }, 400, 'attempt to access JSON non-unsigned-integer as unsigned-integer'],
    [{ log_info: false, log_format: 1 }, 400, 'attempt to access JSON non-string as string'],
    [{ log_info: false, log_format: 'iso8601' }, 400, 'invalid argument for --log_format, got: iso8601'],
    ['{"log_info": fal', 400, 'failed to parse the request JSON buffer: '],
    ['[]', 400, 'failed to parse the request JSON buffer: the body must be a JSON object'],
    ['null', 400, 'failed to parse the request JSON buffer: the body must be a JSON object'],
    ['', 400, 'failed to parse the request JSON buffer: the body is empty']
  ]
  for (const [body, statusCode, message] of refusals) {
    const error = errorOf(t, await post(app, body), statusCode)
    t.ok(error.startsWith(message), `${JSON.stringify(body)}: ${error}`)
  }
  t.same((await get(app)).json(), DEFAULTS, 'nothing changed, not even the settings before the refused one')
  t.equal(app.log.level, 'info')
  t.same((await post(app, { log_file: null, log_info: false })).json(), { ...DEFAULTS, log_info: false }, 'a null log_file is no change, as in Triton')
})

t.test('gRPC refuses what Triton refuses, in its words, and changes nothing', async (t) => {
  const { app, grpc } = await serve(t)
  const refusals: Array<[Record<string, object>, number, string]> = [
    [{ log_file: text(''), log_info: bool(false) }, status.UNIMPLEMENTED, 'log file location can not be updated through network protocol'],
    [{ log_file: {} }, status.UNIMPLEMENTED, 'log file location can not be updated through network protocol'],
    [{ log_info: uint(0) }, status.INVALID_ARGUMENT, "expect boolean for 'log_info'"],
    [{ log_info: bool(false), log_warning: text('false') }, status.INVALID_ARGUMENT, "expect boolean for 'log_warning'"],
    [{ log_info: bool(false), log_error: {} }, status.INVALID_ARGUMENT, "expect boolean for 'log_error'"],
    [{ log_info: bool(false), log_verbose_level: bool(true) }, status.INVALID_ARGUMENT, "expect int32 for 'log_verbose_level'"],
    [{ log_info: bool(false), log_format: uint(1) }, status.INVALID_ARGUMENT, "expect string for 'log_format'"],
    [{ log_info: bool(false), log_format: text('json') }, status.INVALID_ARGUMENT, 'invalid argument for log_format, got: json']
  ]
  for (const [settings, code, message] of refusals) {
    const error = await grpc.fail('LogSettings', { settings })
    t.same([error.code, error.details], [code, message], JSON.stringify(settings))
  }
  t.same(fromGrpc(await grpc.call('LogSettings', {})), DEFAULTS, 'nothing changed')
  t.equal(app.log.level, 'info')
})

t.test('the logging category is restricted on each transport by its own groups', async (t) => {
  const { app, grpc } = await serve(t, {
    restrictedApis: [{ categories: ['logging'], header: 'admin-key', value: 'http-secret' }],
    restrictedProtocols: [{ categories: ['logging'], header: 'triton-grpc-protocol-admin', value: 'grpc-secret' }]
  })
  t.equal(errorOf(t, await get(app), 403), "This API is restricted, expecting header 'admin-key'")
  t.equal(errorOf(t, await app.inject({ method: 'POST', url: '/v2/logging', payload: '{"log_info":false}', headers: { 'admin-key': 'wrong' } }), 403),
    "This API is restricted, expecting header 'admin-key'")
  t.equal((await get(app, { 'admin-key': 'http-secret' })).statusCode, 200)
  const refused = await grpc.fail('LogSettings', { settings: { log_info: bool(false) } })
  t.same([refused.code, refused.details], [status.UNAVAILABLE, "This protocol is restricted, expecting header 'triton-grpc-protocol-admin'"])
  t.equal(app.log.level, 'info', 'a refused call changes nothing')
  const allowed = await grpc.call('LogSettings', { settings: { log_info: bool(false) } }, { 'triton-grpc-protocol-admin': 'grpc-secret' })
  t.equal(fromGrpc(allowed).log_info, false)
  t.equal((await app.inject('/v2/health/live')).statusCode, 200, 'other categories stay open')
})

t.test('without the logging option nothing is served', async (t) => {
  const { app, grpc } = await serve(t, { logging: false })
  t.equal((await get(app)).statusCode, 404)
  t.equal((await grpc.fail('LogSettings', {})).code, status.UNIMPLEMENTED)
  t.notOk((await app.inject('/v2')).json().extensions.includes('logging'))
  t.notOk((await grpc.call('ServerMetadata')).extensions.includes('logging'))
})

t.test('a store keeps a setting for every user of it: changed in one step, or not at all', async (t) => {
  const directory = mkdtempSync(path.join(tmpdir(), 'fts-logging-'))
  t.teardown(() => rmSync(directory, { recursive: true, force: true }))
  const own = new Registry()
  const shared = new Registry({ sharedRegistry: { path: path.join(directory, 'registry.db') } })
  const other = new Registry({ sharedRegistry: { path: path.join(directory, 'registry.db') } })
  t.teardown(() => { own.close(); shared.close(); other.close() })
  for (const [store, reader, what] of [[own.modelStore(), own.modelStore(), 'this process\'s'], [shared.modelStore(), other.modelStore(), 'a shared registry\'s']] as const) {
    t.equal(reader.setting('logging'), undefined, `${what}: none before a change`)
    t.same(store.changeSetting<number[]>('logging', (current) => [...current ?? [], 1]), [1])
    t.same(store.changeSetting<number[]>('logging', (current) => [...current ?? [], 2]), [1, 2], `${what}: the change is given the current value`)
    t.throws(() => store.changeSetting('logging', () => { throw new Error('refused') }), /refused/)
    t.same(reader.setting('logging'), [1, 2], `${what}: a refused change leaves it`)
  }
})

t.test('the settings start from the logger\'s level, or from those given, which set it', async (t) => {
  const levelled = (level: string) => ({ level })
  const settingsOf = (level: string) => new ServerLogging(levelled(level)).settings()
  t.same(settingsOf('trace'), { ...TRITON_LOG_SETTINGS, verboseLevel: 2 })
  t.same(settingsOf('debug'), { ...TRITON_LOG_SETTINGS, verboseLevel: 1 })
  t.same(settingsOf('info'), TRITON_LOG_SETTINGS)
  t.same(settingsOf('warn'), { ...TRITON_LOG_SETTINGS, info: false })
  t.same(settingsOf('error'), { ...TRITON_LOG_SETTINGS, info: false, warning: false })
  t.same(settingsOf('fatal'), { ...TRITON_LOG_SETTINGS, info: false, warning: false, error: false })
  t.same(settingsOf('custom'), TRITON_LOG_SETTINGS, 'a level pino does not define: Triton\'s defaults')

  const silent = levelled('silent')
  t.same(new ServerLogging(silent).settings(), { ...TRITON_LOG_SETTINGS, info: false, warning: false, error: false })
  t.equal(silent.level, 'silent', 'a level that says the same stays')
  const custom = levelled('custom')
  new ServerLogging(custom).update({ format: 'ISO8601' })
  t.equal(custom.level, 'custom', 'a change of the format alone leaves the level as it is')

  const started = levelled('info')
  const logging = new ServerLogging(started, { verboseLevel: 3, info: false, file: 'server.log', format: 'ISO8601' })
  t.equal(started.level, 'trace', 'settings given set the level at once')
  t.same(logging.settings(), { file: 'server.log', info: false, warning: true, error: true, verboseLevel: 3, format: 'ISO8601' })
  t.throws(() => logging.update({ file: '', info: true }), { code: 'ERR_SHM_LOG_FILE_UNSUPPORTED' })
  t.equal(logging.settings().info, false, 'nothing changed')

  const formatOnly = levelled('warn')
  t.same(new ServerLogging(formatOnly, { format: 'ISO8601' }).settings(), { ...TRITON_LOG_SETTINGS, info: false, format: 'ISO8601' })
  t.equal(formatOnly.level, 'warn', 'a format alone sets no level')

  t.equal(pinoLevelOf({ ...TRITON_LOG_SETTINGS, info: false, warning: false }), 'error')
  t.equal(pinoLevelOf({ ...TRITON_LOG_SETTINGS, info: true, warning: false, error: false }), 'info', 'the lowest level on wins')
})
