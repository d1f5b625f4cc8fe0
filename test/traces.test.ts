/**
 * Trace files (Triton's trace extension, `trace_mode: triton`), in Triton's format: one JSON array
 * of objects, a request's description and one object per instant, each with the request's trace
 * id; numbered files `<file>.<N>` for `log_frequency` batches and a used-up `trace_count`. HTTP,
 * gRPC ModelInfer, ModelStreamInfer and generate add their own instants; rate and count honoured;
 * failed requests written with the instants they reached; an ensemble's steps with its
 * `parent_id`; a file that cannot be written; settings of a model; another process's changes.
 */
import { execFileSync, spawn } from 'node:child_process'
import { once } from 'node:events'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import Fastify from 'fastify'
import t, { type Test } from 'tap'
import { modelInferHandler } from '../lib/grpc'
import fastifyTritonShm, {
  InferRequest, kserveModels, type ModelDeclaration, ModelTable, type ModelTableOptions, Registry, type TraceOptions
} from '../lib/index'
import { TRACE_WRITE_BYTES, TraceFile } from '../lib/models/trace-file'
import type { InferRequestWire, ModelSignature } from '../types'
import { grpcClient, startServer } from './helpers/grpc'
import { storePath } from './helpers/registry-peer'
import { int32Bytes, sequenceParameters, streamClient } from './helpers/stream'
import { Gate } from './helpers/sync'
import { echo, runEcho, tensor } from './helpers/traced-models'

const TABLE = ['REQUEST_START', 'QUEUE_START', 'COMPUTE_START', 'COMPUTE_INPUT_END', 'COMPUTE_OUTPUT_START', 'COMPUTE_END', 'REQUEST_END']
const HTTP = ['HTTP_RECV_START', 'HTTP_RECV_END', ...TABLE, 'INFER_RESPONSE_COMPLETE', 'HTTP_SEND_START', 'HTTP_SEND_END']
const GRPC = ['GRPC_WAITREAD_START', 'GRPC_WAITREAD_END', ...TABLE, 'INFER_RESPONSE_COMPLETE', 'GRPC_SEND_START', 'GRPC_SEND_END']

/** One object of Triton's file: a description, or one instant. */
interface TraceObject { id: number, model_name?: string, model_version?: number, request_id?: string, parent_id?: number, timestamps?: Array<{ name: string, ns: number }> }

/** A request's trace, its objects put together as Triton's `trace_summary.py` does. */
interface Trace { id: number, model_name?: string, model_version?: number, request_id?: string, parent_id?: number, names: string[], ns: bigint[] }

function directory (t: Test): string {
  const made = mkdtempSync(path.join(tmpdir(), 'traces-'))
  t.teardown(() => rmSync(made, { recursive: true, force: true }))
  return made
}

/** The objects of a whole trace file (undefined: no file): a JSON array, each object Triton's. */
function objectsIn (file: string): TraceObject[] | undefined {
  if (!existsSync(file)) return undefined
  const objects: unknown = JSON.parse(readFileSync(file, 'utf8'))
  if (!Array.isArray(objects)) throw new Error(`${file} is not a JSON array`)
  for (const object of objects as TraceObject[]) {
    const keys = Object.keys(object)
    const instant = keys.length === 2 && keys[1] === 'timestamps' && object.timestamps?.length === 1 &&
      typeof object.timestamps[0].name === 'string' && Number.isInteger(object.timestamps[0].ns)
    const description = keys.join() === ['id', 'model_name', 'model_version', ...keys.slice(3)].join() && typeof object.model_name === 'string'
    if (keys[0] !== 'id' || !Number.isInteger(object.id) || !(instant || description)) throw new Error(`not one of Triton's trace objects: ${JSON.stringify(object)}`)
  }
  return objects as TraceObject[]
}

/** The traces of a whole trace file, by id in the order they first appear ([] with no file). */
function tracesIn (file: string): Trace[] {
  const traces = new Map<number, Trace>()
  const text = existsSync(file) ? readFileSync(file, 'utf8') : '[]'
  for (const { id, timestamps, ...description } of objectsIn(file) ?? []) {
    let trace = traces.get(id)
    if (trace === undefined) traces.set(id, trace = { id, names: [], ns: [] })
    Object.assign(trace, description)
    for (const { name } of timestamps ?? []) {
      trace.names.push(name)
      // Read from the text: a nanosecond count is past what a double holds exactly.
      trace.ns.push(BigInt((new RegExp(`\\{"id":${id},"timestamps":\\[\\{"name":"${name}","ns":(\\d+)\\}`).exec(text) as RegExpExecArray)[1]))
    }
  }
  return [...traces.values()]
}

const traceOptions = (file: string, options: TraceOptions = {}): ModelTableOptions => ({ trace: { file, level: ['TIMESTAMPS'], rate: 1, ...options } })

/** `table.infer` on `model`, in this process, over `registry`. */
function inferOf (registry: Registry, table: ModelTable, model = 'echo') {
  return (value = 7, id?: string) => {
    const wire: InferRequestWire = { ...(id !== undefined && { id }), inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1], data: [value] }] }
    return table.infer(model, undefined, {
      read: (signature: ModelSignature) => new InferRequest(wire, Buffer.alloc(0), { registry, model: signature }),
      respond: () => 'ok'
    })
  }
}

function local (t: Test, options: ModelTableOptions, declarations = [echo]) {
  const registry = new Registry()
  t.teardown(() => registry.close())
  const table = new ModelTable(declarations, options)
  return { table, registry, infer: inferOf(registry, table) }
}

/** `sending`: told as each answer is handed to Fastify (its onSend hook). */
async function served (t: Test, table: ModelTable, sending?: () => void) {
  const app = Fastify()
  t.teardown(() => app.close())
  if (sending !== undefined) app.addHook('onSend', async () => { sending() })
  await app.register(fastifyTritonShm, { grpc: { port: 0, models: table } })
  await app.register(kserveModels, { models: table })
  const url = await app.listen({ host: '127.0.0.1', port: 0 })
  return { app, url, port: app.tritonGrpc.port as number }
}

t.test('HTTP, gRPC and a stream: Triton\'s objects in one JSON array, each face\'s instants and the table\'s, in order', async (t) => {
  const file = path.join(directory(t), 'trace.json')
  const table = new ModelTable([echo], traceOptions(file))
  const { app, url, port } = await served(t, table)
  const input = { name: 'INPUT0', datatype: 'INT32', shape: [2] }

  const answer = await fetch(`${url}/v2/models/echo/infer`, { method: 'POST', body: JSON.stringify({ id: 'my-request', inputs: [{ ...input, data: [1, 2] }] }) })
  t.equal(answer.status, 200)
  await answer.text()
  const raw = [Buffer.from(Int32Array.of(3, 4).buffer)]
  await grpcClient(t, port).call('ModelInfer', { model_name: 'echo', model_version: '1', inputs: [input], raw_input_contents: raw })
  const stream = streamClient(t, port)
  stream.write({ model_name: 'echo', inputs: [input], raw_input_contents: raw })
  await stream.until(1)
  table.updateTraceSettings(undefined, { rate: 2 })
  stream.write({ model_name: 'echo', inputs: [input], raw_input_contents: raw })
  await stream.until(2)
  await stream.end()
  t.notOk(existsSync(file) && readFileSync(file, 'utf8').endsWith(']'), 'the array is open while the server runs')
  await app.close()

  const text = readFileSync(file, 'utf8')
  t.match(text, /^\[\{"id":1,"timestamps":\[\{"name":"HTTP_RECV_START","ns":\d+\}\]\},\{"id":1,"timestamps":\[\{"name":"HTTP_RECV_END","ns":\d+\}\]\},\{"id":1,"model_name":"echo","model_version":3,"request_id":"my-request"\},\{"id":1,"timestamps":\[\{"name":"REQUEST_START","ns":\d+\}\]\},/,
    'Triton\'s objects, the integers as JSON numbers')
  t.ok(text.endsWith('}]'), 'the array ended when the server stopped')
  const traces = tracesIn(file)
  t.same(traces.map(({ id, model_name: name, model_version: version, request_id: requestId }) => [id, name, version, requestId]),
    [[1, 'echo', 3, 'my-request'], [2, 'echo', 1, undefined], [3, 'echo', 3, undefined]],
    'the version that ran; the request\'s id when it has one; the stream\'s second request not sampled (a rate of 2)')
  t.same(traces.map(({ names }) => names), [HTTP, GRPC, GRPC])
  for (const { ns } of traces) t.ok(ns.every((value, index) => index === 0 || value >= ns[index - 1]), 'in the order they happened')
  t.ok(traces[2].ns[0] > traces[0].ns[0], 'later requests, later instants')
})

t.test('a failed request is written with the instants it reached; one refused before the table is not', async (t) => {
  const file = path.join(directory(t), 'failed.json')
  const table = new ModelTable([echo], traceOptions(file))
  const { app, url, port } = await served(t, table)
  const post = async (body: object, model = 'echo') => {
    const answer = await fetch(`${url}/v2/models/${model}/infer`, { method: 'POST', body: JSON.stringify(body) })
    await answer.text()
    return answer.status
  }
  t.equal(await post({ inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1], data: [-1] }] }), 500, 'the model failed')
  t.equal(await post({ inputs: [{ name: 'WRONG', datatype: 'INT32', shape: [1], data: [1] }] }), 400, 'its inputs could not be read')
  t.equal(await post({ inputs: [] }, 'missing'), 404, 'no such model')
  const error = await grpcClient(t, port).fail('ModelInfer', { model_name: 'echo', inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1] }], raw_input_contents: [int32Bytes([-5])] })
  t.equal(error.code, 13)
  await app.close()
  t.same(tracesIn(file).map(({ names }) => names), [
    ['HTTP_RECV_START', 'HTTP_RECV_END', 'REQUEST_START', 'QUEUE_START', 'COMPUTE_START', 'COMPUTE_INPUT_END', 'COMPUTE_END', 'REQUEST_END', 'HTTP_SEND_START', 'HTTP_SEND_END'],
    ['HTTP_RECV_START', 'HTTP_RECV_END', 'REQUEST_START', 'REQUEST_END', 'HTTP_SEND_START', 'HTTP_SEND_END'],
    ['GRPC_WAITREAD_START', 'GRPC_WAITREAD_END', 'REQUEST_START', 'QUEUE_START', 'COMPUTE_START', 'COMPUTE_INPUT_END', 'COMPUTE_END', 'REQUEST_END', 'GRPC_SEND_START', 'GRPC_SEND_END']
  ], 'no response: no INFER_RESPONSE_COMPLETE')
})

t.test('a client that went away before its answer: its trace still ends, once the handler has answered', async (t) => {
  const file = path.join(directory(t), 'gone.json')
  let running = () => {}
  const ran = new Promise<void>((resolve) => { running = resolve })
  // Runs until the server sees its client go away (the request is abandoned then).
  const waiting: ModelDeclaration = {
    ...echo,
    name: 'waiting',
    versions: ['1'],
    run: (infer) => new Promise((resolve) => {
      infer.signal.addEventListener('abort', () => resolve(runEcho(infer)), { once: true })
      running()
    })
  }
  const table = new ModelTable([waiting], traceOptions(file))
  let answered = () => {}
  const handled = new Promise<void>((resolve) => { answered = resolve })
  const { app, url } = await served(t, table, () => answered())
  const client = new AbortController()
  const answer = fetch(`${url}/v2/models/waiting/infer`, {
    method: 'POST', signal: client.signal, body: JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1], data: [1] }] })
  })
  await ran
  client.abort()
  await t.rejects(answer)
  // Its handler is over (its trace's part too) once Fastify is handed its answer.
  await handled
  await app.close()
  const [trace] = tracesIn(file)
  t.same(trace.names.slice(0, 2), ['HTTP_RECV_START', 'HTTP_RECV_END'])
  t.same(trace.names.slice(-4), ['REQUEST_END', 'INFER_RESPONSE_COMPLETE', 'HTTP_SEND_START', 'HTTP_SEND_END'], 'its face\'s part ended')
})

t.test('an ensemble\'s steps are traced with its request, each with its parent_id; never on their own', async (t) => {
  const file = path.join(directory(t), 'ensemble.json')
  const ensemble: ModelDeclaration = {
    name: 'twice',
    inputs: [tensor('IN')],
    outputs: [tensor('OUT')],
    ensembleScheduling: {
      steps: [
        { model: 'echo', version: '1', inputMap: { INPUT0: 'IN' }, outputMap: { OUTPUT0: 'MID' } },
        { model: 'echo', inputMap: { INPUT0: 'MID' }, outputMap: { OUTPUT0: 'OUT' } }
      ]
    }
  }
  const { table, registry } = local(t, traceOptions(file, { rate: 2 }), [echo, ensemble])
  const run = () => table.infer('twice', undefined, {
    read: (signature: ModelSignature) => new InferRequest({ inputs: [{ name: 'IN', datatype: 'INT32', shape: [1], data: [1] }] }, Buffer.alloc(0), { registry, model: signature }),
    respond: () => 'ok'
  })
  await run()
  await run()
  await table.closeTraces()
  const traces = tracesIn(file)
  t.same(traces.map(({ id, model_name: name, model_version: version, parent_id: parent }) => [id, name, version, parent]),
    [[1, 'twice', 1, undefined], [2, 'echo', 1, 1], [3, 'echo', 3, 1]], 'the second request and its two steps: the steps are not sampled by the rate')
  t.same(traces[0].names, ['REQUEST_START', 'QUEUE_START', 'REQUEST_END'], 'an ensemble computes nothing of its own')
  t.same(traces[1].names, TABLE)
  t.ok(traces[1].ns[0] >= traces[0].ns[1] && traces[2].ns[6] <= traces[0].ns[2], 'the steps ran within the ensemble\'s request')
})

t.test('rate: one request in N; count: N traces, then none, the count answered as what remains', async (t) => {
  const file = path.join(directory(t), 'rate.json')
  const { table, infer } = local(t, traceOptions(file, { rate: 3 }))
  for (let index = 0; index < 9; index++) await infer()
  await table.closeTraces()
  t.equal(tracesIn(file).length, 3, 'the 3rd, 6th and 9th of 9')

  table.updateTraceSettings(undefined, { rate: 1, count: 2 })
  t.equal(table.traceSettings().count, 2)
  for (let index = 0; index < 5; index++) await infer()
  t.equal(table.traceSettings().count, 0, 'none left')
  await table.closeTraces()
  t.equal(tracesIn(file).length, 3, 'a count\'s traces are not in the array')
  t.equal(tracesIn(`${file}.0`).length, 2, 'every request counted was traced: its traces in a numbered file')

  table.updateTraceSettings('echo', { count: 1 })
  await infer()
  await infer()
  await table.closeTraces()
  t.equal(tracesIn(`${file}.1`).length, 1, 'the model\'s own count: one more, in the next numbered file')
  table.updateTraceSettings('echo', { level: [] })
  await infer()
  await table.closeTraces()
  t.same(readdirSync(path.dirname(file)).sort(), ['rate.json', 'rate.json.0', 'rate.json.1'], 'the model\'s level OFF: none')
})

t.test('a count with a rate: its traces wait, and go into the array when the server stops', async (t) => {
  const file = path.join(directory(t), 'counted.json')
  const { table, infer } = local(t, traceOptions(file, { rate: 2, count: 2 }))
  for (let index = 0; index < 6; index++) await infer()
  t.notOk(existsSync(file), 'kept while the setting lives')
  await table.closeTraces()
  t.equal(tracesIn(file).length, 2, 'the 2nd and 4th, in the array')
  t.notOk(existsSync(`${file}.0`), 'not all the requests it counted were traced: no numbered file (as Triton)')
})

t.test('tracing off: nothing sampled, no file', async (t) => {
  const file = path.join(directory(t), 'off.json')
  const { table, infer } = local(t, { trace: { file, rate: 1 } })
  await infer()
  await table.closeTraces()
  t.notOk(existsSync(file))
  t.same(table.traceSettings().level, [])
})

t.test('log_frequency: each N traces a numbered file, a whole array; the rest at stop, or when the setting changes', async (t) => {
  const made = directory(t)
  const other = { ...echo, name: 'other', versions: ['1'] }
  const { table, registry } = local(t, traceOptions(path.join(made, 'global.json'), { logFrequency: 2 }), [echo, other])
  const [inferEcho, inferOther] = [inferOf(registry, table), inferOf(registry, table, 'other')]
  table.updateTraceSettings('other', { rate: 2, logFrequency: 0 })
  for (let index = 0; index < 5; index++) await inferEcho()
  for (let index = 0; index < 4; index++) await inferOther()
  await table.closeTraces()
  const numbered = (index: number) => tracesIn(path.join(made, `global.json.${index}`)).map(({ id }) => id)
  t.same([numbered(0), numbered(1), numbered(2)], [[1, 2], [3, 4], [5]], 'batches of 2 as they fill; the last one at stop')
  t.same(tracesIn(path.join(made, 'global.json')).map(({ model_name: name }) => name), ['other', 'other'], 'other: its own rate, and no batches')

  for (let index = 0; index < 3; index++) await inferEcho()
  const next = table.traceSettings()
  table.updateTraceSettings(undefined, { logFrequency: 10 })
  await inferEcho()
  t.equal(next.logFrequency, 2)
  await table.closeTraces()
  t.same([numbered(3), numbered(4), numbered(5)], [[8, 9], [10], [11]], 'the trace a replaced setting kept: written when it changed')
})

t.test('a trace that ends after its setting was replaced is written at once, as that setting\'s', async (t) => {
  const file = path.join(directory(t), 'late.json')
  const gate = new Gate(false)
  const held: ModelDeclaration = { ...echo, name: 'held', versions: ['1'], async run (infer) { await gate.pass(); runEcho(infer) } }
  const { table, registry } = local(t, traceOptions(file, { logFrequency: 5 }), [held])
  const running = inferOf(registry, table, 'held')()
  await gate.untilHeld(1)
  table.updateTraceSettings(undefined, { logFrequency: 0 })
  gate.open()
  await running
  await table.closeTraces()
  t.equal(tracesIn(`${file}.0`).length, 1, 'a numbered file of its own (the setting it was taken by is gone)')
  t.notOk(existsSync(file), 'not the new setting\'s')
})

t.test('what a setting keeps stays under 1 MiB: past it, it is written', async (t) => {
  const file = path.join(directory(t), 'big.json')
  const big: ModelDeclaration = { ...echo, name: 'big', versions: ['1'] }
  const { table, registry } = local(t, traceOptions(file, { logFrequency: 100000 }), [big])
  const id = 'x'.repeat(300 * 1024)
  const infer = inferOf(registry, table, 'big')
  for (let index = 0; index < 4; index++) await infer(1, id)
  await table.closeTraces()
  t.equal(tracesIn(`${file}.0`).length, 4, 'the fourth trace passed 1 MiB: the four written')
  t.notOk(existsSync(`${file}.1`), 'nothing left at stop')
})

t.test('the array: traces that arrive during a write go into the next, waited for by a flush; a stop ends it; the next trace starts it anew', async (t) => {
  const file = path.join(directory(t), 'array.json')
  const traces = new TraceFile(file)
  traces.add('{"id":1}')
  traces.add('{"id":2}')
  const writing = traces.flush()
  traces.add('{"id":3}')
  await writing
  t.equal(readFileSync(file, 'utf8'), '[{"id":1},{"id":2},{"id":3}', 'open until the stop')
  await traces.close()
  t.equal(readFileSync(file, 'utf8'), '[{"id":1},{"id":2},{"id":3}]')
  await traces.close()
  traces.add('{"id":4}')
  await traces.close()
  t.equal(readFileSync(file, 'utf8'), '[{"id":4}]', 'started anew, as Triton starts a trace file')
})

t.test('the array: 64 KiB of traces waiting are written at once, not at the end of their delay', async (t) => {
  const made = directory(t)
  const pipe = path.join(made, 'pipe')
  execFileSync('mkfifo', [pipe])
  const big = `{"id":1,"text":"${'x'.repeat(TRACE_WRITE_BYTES)}"}`
  // A reader of the array's first write; no trace waits an hour here, nor is any flushed.
  const reader = spawn('head', ['-c', String(big.length + 1), pipe], { stdio: ['ignore', 'pipe', 'inherit'] })
  const exited = once(reader, 'close')
  let read = ''
  reader.stdout.on('data', (chunk: Buffer) => { read += chunk.toString() })
  const traces = new TraceFile(pipe, undefined, 3_600_000)
  t.teardown(() => traces.close())
  traces.add(big)
  await exited
  t.equal(read, `[${big}`, '64 KiB waiting: written at once')
})

t.test('a file that cannot be written: logged, its traces dropped, started again by the next trace', async (t) => {
  const made = path.join(directory(t), 'later')
  const file = path.join(made, 'trace.json')
  const logged: object[] = []
  const log = { error: (details: object) => { logged.push(details) } }
  const traces = new TraceFile(file, log)
  traces.add('{"id":1}')
  traces.addNumbered(['{"id":2}'])
  await traces.flush()
  const fileOf = (details: object) => (details as { file: string }).file
  t.match(logged.sort((a, b) => fileOf(a).localeCompare(fileOf(b))),
    [{ err: { code: 'ENOENT' }, file }, { err: { code: 'ENOENT' }, file: `${file}.0` }], 'logged with the file')
  mkdirSync(made)
  traces.add('{"id":3}')
  traces.addNumbered(['{"id":4}'])
  await traces.close()
  t.equal(readFileSync(file, 'utf8'), '[{"id":3}]', 'the dropped trace is not written')
  t.equal(readFileSync(`${file}.1`, 'utf8'), '[{"id":4}]', 'numbered on')
  const full = new TraceFile('/dev/full', log)
  full.add('{"id":5}')
  await full.close()
  t.match(logged[2], { err: { code: 'ENOSPC' }, file: '/dev/full' }, 'a write that fails: logged, the file closed')
  full.add('{"id":6}')
  await full.flush()
  t.equal(logged.length, 4, 'the next trace opens it again')
  const ending = new TraceFile('/dev/full', log)
  await ending.close()
  t.equal(logged.length, 4, 'a file never written is not ended')

  const pipe = path.join(made, 'pipe')
  execFileSync('mkfifo', [pipe])
  // A reader that takes the first write (at its delay's end: nothing is flushed) and goes: the
  // array's end finds no reader.
  const reader = spawn('head', ['-c', '9', pipe], { stdio: ['ignore', 'pipe', 'inherit'] })
  const exited = once(reader, 'close')
  let read = ''
  reader.stdout.on('data', (chunk: Buffer) => { read += chunk.toString() })
  const piped = new TraceFile(pipe, log)
  piped.add('{"id":7}')
  await exited
  t.equal(read, '[{"id":7}')
  await piped.close()
  t.match(logged[4], { err: { code: 'EPIPE' }, file: pipe }, 'the array\'s end that cannot be written: logged, the file closed')
})

t.test('generate and generate_stream: the HTTP face\'s instants', async (t) => {
  const file = path.join(directory(t), 'generate.json')
  const text: ModelDeclaration = {
    name: 'text',
    inputs: [{ name: 'text_input', datatype: 'BYTES', shape: [1] }],
    outputs: [{ name: 'text_output', datatype: 'BYTES', shape: [1] }],
    run (infer) { infer.output<Buffer[]>('text_output', [1])[0] = Buffer.from('done') }
  }
  const table = new ModelTable([text], traceOptions(file))
  const { app, url } = await served(t, table)
  for (const route of ['generate', 'generate_stream']) {
    const answer = await fetch(`${url}/v2/models/text/${route}`, { method: 'POST', body: JSON.stringify({ text_input: 'go' }) })
    t.equal(answer.status, 200)
    await answer.text()
  }
  await app.close()
  t.same(tracesIn(file).map(({ names }) => names), [HTTP, HTTP])
})

t.test('a request another process runs (its sequence lives there) is traced where it was received', async (t) => {
  const store = storePath(t)
  const made = directory(t)
  const accumulator: ModelDeclaration = {
    name: 'acc',
    inputs: [{ name: 'INPUT', datatype: 'INT32', shape: [1] }],
    outputs: [{ name: 'OUTPUT', datatype: 'INT32', shape: [1] }],
    sequenceBatching: { controlInputs: [{ name: 'START', kind: 'CONTROL_SEQUENCE_START', datatype: 'INT32' }] },
    run (infer) { infer.output<Int32Array>('OUTPUT', [1])[0] = infer.input<Int32Array>('INPUT').data[0] }
  }
  const processes = await Promise.all(['a', 'b'].map(async (name) => {
    const table = new ModelTable([accumulator], traceOptions(path.join(made, `${name}.json`)))
    const app = Fastify()
    t.teardown(() => app.close())
    await app.register(fastifyTritonShm, { sharedRegistry: { path: store }, grpc: { port: 0, models: table } })
    await app.register(kserveModels, { models: table })
    await app.ready()
    return { app, port: app.tritonGrpc.port as number }
  }))
  const send = (process: number, start: boolean) => grpcClient(t, processes[process].port).call('ModelInfer', {
    model_name: 'acc', inputs: [{ name: 'INPUT', datatype: 'INT32', shape: [1] }], raw_input_contents: [int32Bytes([1])], parameters: sequenceParameters(5, start)
  })
  await send(0, true)
  await send(1, false)
  await Promise.all(processes.map(({ app }) => app.close()))
  const traced = (name: string) => tracesIn(path.join(made, `${name}.json.pid${process.pid}`)).map(({ names }) => names)
  t.same(traced('a'), [GRPC], 'a: its own request; the one it ran for b is b\'s')
  t.same(traced('b'), [['GRPC_WAITREAD_START', 'GRPC_WAITREAD_END', 'REQUEST_START', 'QUEUE_START', 'REQUEST_END', 'INFER_RESPONSE_COMPLETE', 'GRPC_SEND_START', 'GRPC_SEND_END']],
    'b: what it saw of the request it handed over; each process writes files of its own')
})

t.test('settings another process of the store changed apply to the next request', async (t) => {
  const store = storePath(t)
  const made = directory(t)
  const [one, two] = [0, 1].map((index) => {
    const registry = new Registry({ sharedRegistry: { path: store, checkIntervalMs: 1000 } })
    t.teardown(() => registry.close())
    const table = new ModelTable([echo], { trace: { file: path.join(made, `shared${index}.json`), rate: 1 } })
    table.serveWith(registry)
    return { table, infer: inferOf(registry, table) }
  })
  await two.infer()
  one.table.updateTraceSettings(undefined, { level: ['TIMESTAMPS'] })
  await two.infer()
  await two.table.closeTraces()
  t.equal(tracesIn(path.join(made, `shared1.json.pid${process.pid}`)).length, 1, 'traced in the other process from its next request')
})

t.test('a host\'s own gRPC server: the trace ends once grpc-js has the answer', async (t) => {
  const file = path.join(directory(t), 'host.json')
  const { table, registry } = local(t, traceOptions(file, { rate: 2 }))
  const port = await startServer(t, { ModelInfer: modelInferHandler({ registry, models: table }) })
  const client = grpcClient(t, port)
  for (const value of [1, 2]) {
    await client.call('ModelInfer', { model_name: 'echo', inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1] }], raw_input_contents: [int32Bytes([value])] })
  }
  await table.closeTraces()
  t.same(tracesIn(file).map(({ id, names }) => [id, names]), [[1, GRPC]], 'the second call, the first not traced')
})
