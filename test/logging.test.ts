/**
 * What the plugin logs, captured from a real Fastify logger (pino) writing to a stream of the
 * test's own: registers and unregisters at info with the region's name, key and size; refused
 * registrations at debug with the region and the reason; never tensor data and never a path of
 * the shared memory directory, at any level. And what clients are told: error bodies that carry
 * no stack, no path, no errno, and nothing about an object other than the one they named.
 */
import { execFile, spawnSync } from 'node:child_process'
import { existsSync, truncateSync } from 'node:fs'
import type { AddressInfo } from 'node:net'
import { promisify } from 'node:util'
import Fastify, { type FastifyInstance, type LightMyRequestResponse } from 'fastify'
import t, { type Test } from 'tap'
import { buildServer } from '../example/server'
import fastifyTritonShm, { type FastifyTritonShmOptions } from '../lib/index'
import { registerBody, SYSTEM } from './helpers/app'
import {
  binaryBody, binaryInput, bytesOfValues, jsonInput, makeMappedObject, serializeStrings, shmInput, shmOutput
} from './helpers/kserve'
import { DEFERRED, LEVEL, LogCapture, type LogLine, NOT_IN_THIS_SHM, REFUSED, REGISTERED, UNREGISTERED } from './helpers/observe'
import { makeObject, objectPath, PAGE_SIZE, uniqueKey } from './helpers/shm'
import { makeDirectory, makeFifo, makeSymlink } from './helpers/special-objects'

/** An app with the plugin whose logger writes every line at `level` and above to `capture`. */
async function loggedApp (t: Test, capture: LogCapture, level = 'debug', options: FastifyTritonShmOptions = {}): Promise<FastifyInstance> {
  const app = Fastify({ logger: { level, stream: capture.stream } })
  t.teardown(() => app.close())
  await app.register(fastifyTritonShm, options)
  await app.ready()
  return app
}

const post = (app: FastifyInstance, url: string, payload?: string) =>
  app.inject({ method: 'POST', url: `${SYSTEM}${url}`, payload })

const registerRequest = (app: FastifyInstance, name: string, body: unknown) =>
  post(app, `/region/${encodeURIComponent(name)}/register`, typeof body === 'string' ? body : JSON.stringify(body))

/** The plugin's own lines: everything but Fastify's request lines. */
const pluginLines = (capture: LogCapture) =>
  capture.lines.filter((line) => line.msg !== 'incoming request' && line.msg !== 'request completed')

/** The fields of a line that the plugin chose (pino's own fields left out). */
function fieldsOf (line: LogLine): Record<string, unknown> {
  const { level: _level, time: _time, pid: _pid, hostname: _hostname, ...fields } = line
  return fields
}

/** The JSON body of an error answer; fails the test unless it is exactly {"error": string}. */
function errorOf (t: Test, response: LightMyRequestResponse): string {
  const body = JSON.parse(response.body) as Record<string, unknown>
  t.same(Object.keys(body), ['error'], `${response.statusCode}: the body holds "error" and nothing else`)
  return String(body.error)
}

t.test('register and unregister are logged at info, with the region\'s name, key and size', async (t) => {
  const capture = new LogCapture()
  const app = await loggedApp(t, capture)
  const key = makeObject(t, 4 * PAGE_SIZE, 'logged')
  const name = 'my region/é'

  t.equal((await registerRequest(app, name, { key, offset: 5, byte_size: 100 })).statusCode, 200)
  t.same(pluginLines(capture).map((line) => [line.level, fieldsOf(line)]), [
    [LEVEL.info, { region: name, key, offset: 5, byteSize: 100, msg: REGISTERED }]
  ], 'one info line: the decoded name, the key as sent, offset and byte size')

  capture.clear()
  t.equal((await post(app, `/region/${encodeURIComponent(name)}/unregister`)).statusCode, 200)
  t.same(pluginLines(capture).map((line) => [line.level, fieldsOf(line)]), [
    [LEVEL.info, { region: name, key, byteSize: 100, msg: UNREGISTERED }]
  ], 'one info line when the region is unmapped')

  capture.clear()
  t.equal((await post(app, '/region/never-registered/unregister')).statusCode, 200)
  t.same(pluginLines(capture), [], 'an unregister of an unknown name logs nothing')

  // Deferred: one line when asked, one when the region really goes.
  t.equal((await registerRequest(app, 'held', { key, byte_size: 64 })).statusCode, 200)
  const lease = app.systemSharedMemory.acquire('held', 0, 64)
  capture.clear()
  t.equal((await post(app, '/region/held/unregister')).statusCode, 200)
  t.equal((await post(app, '/unregister')).statusCode, 200)
  t.same(pluginLines(capture).map((line) => [line.level, fieldsOf(line)]), [
    [LEVEL.info, { region: 'held', liveLeases: 1, msg: DEFERRED }],
    [LEVEL.info, { region: 'held', liveLeases: 1, msg: DEFERRED }]
  ], 'a deferred unregister says so at info, and does not claim the region is gone')
  capture.clear()
  lease.release()
  lease.release()
  t.same(pluginLines(capture).map((line) => [line.level, fieldsOf(line)]), [
    [LEVEL.info, { region: 'held', key, byteSize: 64, msg: UNREGISTERED }]
  ], 'the last release unmaps it: logged once')

  // Unregister-all: one line per region; the host's own registrations are logged the same way.
  capture.clear()
  app.systemSharedMemory.register('by-host', { key, byteSize: 8 })
  t.equal((await registerRequest(app, 'by-client', { key, byte_size: 16 })).statusCode, 200)
  t.equal((await post(app, '/unregister')).statusCode, 200)
  const lines = pluginLines(capture).map((line) => [line.level, line.msg, line.region])
  t.same(lines.slice(0, 2), [[LEVEL.info, REGISTERED, 'by-host'], [LEVEL.info, REGISTERED, 'by-client']])
  t.same(lines.slice(2).sort(), [[LEVEL.info, UNREGISTERED, 'by-client'], [LEVEL.info, UNREGISTERED, 'by-host']],
    'unregister-all: one line per region')
})

t.test('the levels filter as they should: info keeps registers and drops refusals, warn drops both', async (t) => {
  const key = makeObject(t, PAGE_SIZE, 'levels')
  for (const [level, expected] of [
    ['info', [REGISTERED, UNREGISTERED]],
    ['warn', []]
  ] as const) {
    const capture = new LogCapture()
    const app = await loggedApp(t, capture, level)
    t.equal((await registerRequest(app, 'r', { key, byte_size: 8 })).statusCode, 200)
    t.equal((await registerRequest(app, 'r', { key, byte_size: 8 })).statusCode, 400)
    t.equal((await registerRequest(app, 'other', { key: '/', byte_size: 8 })).statusCode, 400)
    t.equal((await post(app, '/region/r/unregister')).statusCode, 200)
    t.same(pluginLines(capture).map((line) => line.msg), expected, `at ${level}`)
  }
})

t.test('refused registrations are logged at debug with the region and the reason the client got', async (t) => {
  const capture = new LogCapture()
  const app = await loggedApp(t, capture, 'debug', { limits: { maxRegions: 2, maxRegionBytes: 2 * PAGE_SIZE, maxTotalBytes: 3 * PAGE_SIZE } })
  const key = makeObject(t, 4 * PAGE_SIZE, 'refusals')
  const missing = uniqueKey('missing')
  const fifo = makeFifo(t)
  const directory = makeDirectory(t)
  const target = makeObject(t, PAGE_SIZE, 'symlink_target')
  const link = makeSymlink(t, objectPath(target))
  t.equal((await registerRequest(app, 'taken', { key, byte_size: 2 * PAGE_SIZE })).statusCode, 200)

  const refusals: Array<[string, string, object, string]> = [
    ['duplicate name', 'taken', { key, byte_size: 8 }, "shared memory region 'taken' already in manager"],
    ['key of slashes only', 'r', { key: '///', byte_size: 8 }, "cannot register shared memory region 'r' - invalid shm key '///'"],
    ['key with a slash inside', 'r', { key: '/a/b', byte_size: 8 }, "cannot register shared memory region 'r' - invalid shm key '/a/b'"],
    ['reserved prefix', 'r', { key: '/triton_python_backend_shm_region_7', byte_size: 8 },
      "cannot register shared memory region 'r' with key '/triton_python_backend_shm_region_7' as the key contains the reserved prefix 'triton_python_backend_shm_region_'"],
    ['missing object', 'r', { key: missing, byte_size: 8 }, `Unable to open shared memory region: '${missing}'`],
    ['FIFO', 'r', { key: fifo, byte_size: 8 }, `Unable to open shared memory region: '${fifo}'`],
    ['directory', 'r', { key: directory, byte_size: 8 }, `Unable to open shared memory region: '${directory}'`],
    ['symbolic link', 'r', { key: link, byte_size: 8 }, `Unable to open shared memory region: '${link}'`],
    ['byte size 0', 'r', { key, byte_size: 0 }, "failed to register shared memory region 'r': invalid args"],
    ['beyond the object', 'r', { key, offset: 4 * PAGE_SIZE - 8, byte_size: 16 }, "failed to register shared memory region 'r': invalid args"],
    ['region too large', 'r', { key, byte_size: 2 * PAGE_SIZE + 1 },
      `cannot register shared memory region 'r': byte_size ${2 * PAGE_SIZE + 1} exceeds the server's limit of ${2 * PAGE_SIZE} bytes per region`],
    ['total too large', 'r', { key, byte_size: PAGE_SIZE + 1 },
      `cannot register shared memory region 'r': mapping ${PAGE_SIZE + 1} more bytes would exceed the server's limit of ${3 * PAGE_SIZE} bytes in total`]
  ]
  for (const [label, name, body, reason] of refusals) {
    capture.clear()
    const response = await registerRequest(app, name, body)
    t.equal(response.statusCode, 400, `${label}: 400`)
    t.equal(errorOf(t, response), reason, `${label}: the client's message`)
    const lines = pluginLines(capture)
    // A key that names nothing here also tells the operator the likely cause, at info.
    const hint = label === 'missing object' ? [[LEVEL.info, NOT_IN_THIS_SHM, name, undefined]] : []
    t.same(lines.map((line) => [line.level, line.msg, line.region, line.reason]), [...hint, [LEVEL.debug, REFUSED, name, reason]],
      `${label}: one debug line with the region and the same reason`)
    t.notOk(lines.some((line) => 'err' in line || 'stack' in line), `${label}: no error object or stack in the line`)
  }

  // The limit on the number of regions, with a second region in place.
  t.equal((await registerRequest(app, 'second', { key, byte_size: 8 })).statusCode, 200)
  capture.clear()
  const full = await registerRequest(app, 'third', { key, byte_size: 8 })
  const reason = "cannot register shared memory region 'third': the server allows at most 2 registered regions"
  t.equal(errorOf(t, full), reason)
  t.same(pluginLines(capture).map((line) => [line.level, line.msg, line.region, line.reason]), [[LEVEL.debug, REFUSED, 'third', reason]])
  t.notOk(capture.text.join('').includes(objectPath(target)), 'the symbolic link\'s target is named in no line')
})

t.test('refusals before the registry (body, disabled registration, restricted API) are logged at debug too', async (t) => {
  const key = makeObject(t, PAGE_SIZE, 'early')
  const expectDebugRefusal = async (capture: LogCapture, label: string, request: Promise<LightMyRequestResponse>) => {
    capture.clear()
    const response = await request
    const reason = errorOf(t, response)
    t.same(pluginLines(capture).map((line) => [line.level, line.msg, line.region, line.reason]), [[LEVEL.debug, REFUSED, 'r', reason]],
      `${label} (${response.statusCode}): one debug line with the region and the reason`)
  }
  const capture = new LogCapture()
  const app = await loggedApp(t, capture)
  await expectDebugRefusal(capture, 'no byte_size', registerRequest(app, 'r', { key }))
  await expectDebugRefusal(capture, 'no key', registerRequest(app, 'r', { byte_size: 8 }))
  await expectDebugRefusal(capture, 'byte_size as a string', registerRequest(app, 'r', { key, byte_size: '8' }))
  await expectDebugRefusal(capture, 'not JSON', registerRequest(app, 'r', '{"key":'))

  const disabledCapture = new LogCapture()
  const disabled = await loggedApp(t, disabledCapture, 'debug', { allowClientShm: false })
  await expectDebugRefusal(disabledCapture, 'registration disabled', registerRequest(disabled, 'r', { key, byte_size: 8 }))

  const restrictedCapture = new LogCapture()
  const restricted = await loggedApp(t, restrictedCapture, 'debug', { restrictedApi: { header: 'x-shm', value: 'yes' } })
  await expectDebugRefusal(restrictedCapture, 'restricted API', registerRequest(restricted, 'r', { key, byte_size: 8 }))
})

// ---------------------------------------------------------------------------------------------
// What never appears: tensor data in logs, paths and errno anywhere, internals in error bodies

const INPUT0 = Array.from({ length: 16 }, (_, index) => 913370000 + index)
const INPUT1 = Array.from({ length: 16 }, (_, index) => 424240000 + index)
const SECRET = 'tensor-secret'
const STRINGS = Array.from({ length: 16 }, (_, index) => `${SECRET}-${index}`)
/** Digits of the inputs and of every result (sums 13376..., differences 48913...), and the strings. */
const TENSOR_MARKERS = ['91337', '42424', '13376', '48913', SECRET]

/** Errno names and system call names: what a leaked native error would carry. */
const SYSTEM_ERROR = /\b(E(NOENT|ACCES|ISDIR|LOOP|NXIO|PERM|INVAL|NOTDIR|MFILE|NFILE|NOMEM|BADF|NODEV)|shm_open|fstat|mmap|munmap|syscall|errno)\b/

t.test('no tensor data and no shared memory path in any log line, at trace level', async (t) => {
  const capture = new LogCapture()
  const app = await buildServer({ fastify: { logger: { level: 'trace', stream: capture.stream } } })
  t.teardown(() => app.close())
  await app.ready()
  const infer = (model: string, payload: string | Buffer, headers: Record<string, string> = {}) =>
    app.inject({ method: 'POST', url: `/v2/models/${model}/infer`, payload, headers })

  // JSON data, then the binary extension.
  const json = await infer('simple', JSON.stringify({ inputs: [jsonInput('INPUT0', 'INT32', [1, 16], INPUT0), jsonInput('INPUT1', 'INT32', [1, 16], INPUT1)] }))
  t.equal(json.statusCode, 200, json.body)
  t.match(json.body, /13376/, 'the results are in the response, so their absence from the log means something')
  const binary = binaryBody({ inputs: [binaryInput('INPUT0', 'INT32', [1, 16], 64), binaryInput('INPUT1', 'INT32', [1, 16], 64)] },
    [bytesOfValues('INT32', INPUT0), bytesOfValues('INT32', INPUT1)])
  t.equal((await infer('simple', binary.payload, binary.headers)).statusCode, 200)
  const strings = await infer('simple_string', JSON.stringify({
    inputs: [jsonInput('INPUT0', 'BYTES', [1, 16], STRINGS), jsonInput('INPUT1', 'BYTES', [1, 16], STRINGS)]
  }))
  t.equal(strings.statusCode, 200, strings.body)

  // Shared memory, inputs and outputs.
  const input = makeMappedObject(t, 128, 'log_in')
  const output = makeMappedObject(t, 128, 'log_out')
  input.bytes.set(bytesOfValues('INT32', [...INPUT0, ...INPUT1]))
  const serialized = serializeStrings(STRINGS)
  const stringInput = makeMappedObject(t, serialized.length, 'log_strings')
  stringInput.bytes.set(serialized)
  for (const [name, object] of [['in', input], ['out', output], ['strings', stringInput]] as const) {
    t.equal((await post(app, `/region/${name}/register`, registerBody(object.key, object.bytes.length))).statusCode, 200)
  }
  const shm = await infer('simple', JSON.stringify({
    inputs: [shmInput('INPUT0', 'INT32', [1, 16], 'in', 64, 0), shmInput('INPUT1', 'INT32', [1, 16], 'in', 64, 64)],
    outputs: [shmOutput('OUTPUT0', 'out', 64, 0), shmOutput('OUTPUT1', 'out', 64, 64)]
  }))
  t.equal(shm.statusCode, 200, shm.body)
  t.equal(new Int32Array(output.bytes.buffer, output.bytes.byteOffset, 1)[0], INPUT0[0] + INPUT1[0], 'the results went to shared memory')
  const stringShm = await infer('simple_string', JSON.stringify({
    inputs: [shmInput('INPUT0', 'BYTES', [1, 16], 'strings', serialized.length), shmInput('INPUT1', 'BYTES', [1, 16], 'strings', serialized.length)]
  }))
  t.equal(stringShm.statusCode, 200, stringShm.body)

  // Failures that involve the data or the objects.
  const mismatch = await infer('simple', JSON.stringify({ inputs: [jsonInput('INPUT0', 'INT32', [1, 16], INPUT0.slice(1)), jsonInput('INPUT1', 'INT32', [1, 16], INPUT1)] }))
  t.equal(mismatch.statusCode, 400, mismatch.body)
  const fifo = makeFifo(t)
  t.equal((await post(app, '/region/fifo/register', registerBody(fifo, 8))).statusCode, 400)
  t.equal((await post(app, '/region/missing/register', registerBody(uniqueKey('missing'), 8))).statusCode, 400)
  truncateSync(objectPath(input.key), 0)
  const truncated = await infer('simple', JSON.stringify({
    inputs: [shmInput('INPUT0', 'INT32', [1, 16], 'in', 64, 0), shmInput('INPUT1', 'INT32', [1, 16], 'in', 64, 64)]
  }))
  t.equal(truncated.statusCode, 400, truncated.body)
  t.equal((await post(app, '/unregister')).statusCode, 200)

  t.ok(capture.lines.length > 30, `${capture.lines.length} lines were logged`)
  t.ok(capture.lines.some((line) => line.level <= LEVEL.debug), 'down to debug and trace')
  const withoutClock = capture.lines.map(({ time: _time, pid: _pid, responseTime: _responseTime, ...rest }) => JSON.stringify(rest))
  for (const marker of TENSOR_MARKERS) {
    t.same(withoutClock.filter((line) => line.includes(marker)), [], `no line holds tensor data (${marker})`)
  }
  t.same(capture.text.filter((line) => line.includes('/dev/shm/')), [], 'no line names a path in the shared memory directory')
  t.same(capture.text.filter((line) => SYSTEM_ERROR.test(line)), [], 'no line carries an errno or a system call')
})

t.test('error bodies carry no stack, no path, no errno, and nothing about another object', async (t) => {
  const capture = new LogCapture()
  const hostRule = (key: string) => {
    if (key.endsWith('_boom')) throw new Error('the host\'s key rule failed')
    return true
  }
  const app = await loggedApp(t, capture, 'debug', { allowKey: hostRule, limits: { maxRegionBytes: 2 * PAGE_SIZE } })
  const key = makeObject(t, 2 * PAGE_SIZE, 'bodies')
  const target = makeObject(t, PAGE_SIZE, 'hidden_target')
  const links = [makeSymlink(t, objectPath(target)), makeSymlink(t, '/etc/passwd'), makeSymlink(t, objectPath(uniqueKey('dangling')))]
  const specials = [makeFifo(t), makeDirectory(t), uniqueKey('missing'), ...links]
  const truncatedKey = makeObject(t, 2 * PAGE_SIZE, 'shrinks')

  const answers: Array<[string, LightMyRequestResponse]> = []
  for (const special of specials) answers.push([`register ${special}`, await registerRequest(app, 'r', { key: special, byte_size: 8 })])
  answers.push(['beyond the object', await registerRequest(app, 'r', { key, offset: PAGE_SIZE, byte_size: 2 * PAGE_SIZE })])
  answers.push(['over the limit', await registerRequest(app, 'r', { key, byte_size: 2 * PAGE_SIZE + 1 })])
  answers.push(['invalid key', await registerRequest(app, 'r', { key: '/../etc/passwd', byte_size: 8 })])
  answers.push(['unknown status', await app.inject({ method: 'GET', url: `${SYSTEM}/region/nope/status` })])
  answers.push(['not JSON', await registerRequest(app, 'r', '{')])
  const boom = await registerRequest(app, 'r', { key: '/host_rule_boom', byte_size: 8 })
  answers.push(['the host\'s rule throws', boom])
  t.equal(boom.statusCode, 500)
  t.equal(boom.body, '{"error":"Internal Server Error"}', 'an unexpected failure is answered without its message or stack')

  // Through the inference path: a region whose object shrank, and ranges outside a region.
  const server = await buildServer()
  t.teardown(() => server.close())
  t.equal((await server.inject({ method: 'POST', url: `${SYSTEM}/region/in/register`, payload: registerBody(truncatedKey, 128) })).statusCode, 200)
  truncateSync(objectPath(truncatedKey), 0)
  const inputs = (offset: number) => [shmInput('INPUT0', 'INT32', [1, 16], 'in', 64, offset), shmInput('INPUT1', 'INT32', [1, 16], 'in', 64, offset)]
  for (const [label, offset] of [['truncated object', 0], ['offset beyond the region', 4096]] as const) {
    answers.push([label, await server.inject({ method: 'POST', url: '/v2/models/simple/infer', payload: JSON.stringify({ inputs: inputs(offset) }) })])
  }
  answers.push(['unknown region', await server.inject({
    method: 'POST',
    url: '/v2/models/simple/infer',
    payload: JSON.stringify({ inputs: [shmInput('INPUT0', 'INT32', [1, 16], 'nope', 64), shmInput('INPUT1', 'INT32', [1, 16], 'nope', 64)] })
  })])

  for (const [label, response] of answers) {
    t.ok(response.statusCode >= 400, `${label}: refused (${response.statusCode})`)
    const message = errorOf(t, response)
    t.notMatch(message, /\n\s+at |Error:|\.ts:\d|\.js:\d/, `${label}: no stack`)
    t.notOk(message.includes('/dev/shm'), `${label}: no shared memory path`)
    t.notMatch(message, SYSTEM_ERROR, `${label}: no errno or system call`)
    t.notOk(message.includes(target) || message.includes('passwd:'), `${label}: nothing about the object a link points to`)
  }
  const everything = capture.text.join('')
  t.notOk(everything.includes(target), 'no log line names the object a link points to')
  t.notOk(everything.includes('/dev/shm/'), 'no log line names a path in the shared memory directory')
  t.ok(capture.lines.some((line) => line.level === LEVEL.error && line.msg === 'request failed'),
    'the unexpected failure is logged for the operator, at error')
})

/** A client that writes its object into its /dev/shm and asks the server at `port` to register it. */
const OTHER_SHM_CLIENT = `
  const [port, key] = process.argv.slice(1)
  require('node:fs').writeFileSync('/dev/shm' + key, Buffer.alloc(64), { mode: 0o600 })
  fetch('http://127.0.0.1:' + port + '${SYSTEM}/region/r/register', { method: 'POST', body: JSON.stringify({ key, byte_size: 64 }) })
    .then(async (response) => console.log(JSON.stringify({ statusCode: response.status, body: await response.text() })))`

t.test('a client that does not share the server\'s /dev/shm: Triton\'s message to it, the likely cause in the server\'s log', async (t) => {
  // As a container without --ipc=host has: a mount namespace of its own, a tmpfs of its own at /dev/shm.
  const ownShm = ['--mount', 'sh', '-c', 'mount -t tmpfs -o size=1m,mode=1777 tmpfs /dev/shm && exec "$@"', 'sh']
  const permitted = spawnSync('unshare', [...ownShm, 'true'], { encoding: 'utf8' })
  if (permitted.status !== 0) {
    t.pass('a client in another mount namespace', { skip: `unshare --mount and a tmpfs mount are not permitted here: ${(permitted.stderr || permitted.error?.message || '').trim()}` })
    return
  }
  const capture = new LogCapture()
  const app = await loggedApp(t, capture, 'info')
  await app.listen({ host: '127.0.0.1', port: 0 })
  const key = uniqueKey('elsewhere')
  capture.clear()
  const { stdout } = await promisify(execFile)('unshare', [...ownShm, process.execPath, '-e', OTHER_SHM_CLIENT, String((app.server.address() as AddressInfo).port), key],
    { env: { ...process.env, _TAPJS_PROCESSINFO_COVERAGE_: '0' } })
  t.same(JSON.parse(stdout), { statusCode: 400, body: JSON.stringify({ error: `Unable to open shared memory region: '${key}'` }) },
    'the client gets Triton\'s message, and nothing more')
  t.notOk(existsSync(objectPath(key)), 'the object was never in this /dev/shm')
  t.same(pluginLines(capture).map((line) => [line.level, line.msg, line.region, line.key]), [[LEVEL.info, NOT_IN_THIS_SHM, 'r', key]],
    'the server\'s log says the object does not exist in its /dev/shm, and why that most likely is')
})
