/**
 * Trace files (Triton's trace extension, `trace_mode: triton`): the requests a setting samples
 * written as one JSON object per line, for HTTP, gRPC ModelInfer and ModelStreamInfer; rate and
 * count honoured; batches of `log_frequency` written as one append; a file that cannot be
 * written; a model's own settings; settings changed by another process of a store.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import Fastify from 'fastify'
import t, { type Test } from 'tap'
import fastifyTritonShm, {
  InferRequest, kserveModels, type ModelDeclaration, ModelTable, type ModelTableOptions, Registry, type TraceOptions
} from '../lib/index'
import { TraceFile } from '../lib/models/trace-file'
import type { InferRequestWire, ModelSignature } from '../types'
import { grpcClient } from './helpers/grpc'
import { storePath } from './helpers/registry-peer'
import { streamClient } from './helpers/stream'

const tensor = (name: string) => ({ name, datatype: 'INT32' as const, shape: [-1] })

const echo: ModelDeclaration = {
  name: 'echo',
  versions: ['1', '3'],
  inputs: [tensor('INPUT0')],
  outputs: [tensor('OUTPUT0')],
  run (infer) {
    const { data, shape } = infer.input<Int32Array>('INPUT0')
    infer.output<Int32Array>('OUTPUT0', shape).set(data)
  }
}

const ACTIVITIES = ['REQUEST_START', 'QUEUE_START', 'COMPUTE_START', 'COMPUTE_INPUT_END', 'COMPUTE_OUTPUT_START', 'COMPUTE_END', 'REQUEST_END']

interface Trace { id: number, model_name: string, model_version: number, timestamps: Array<{ name: string, ns: number }> }

function directory (t: Test): string {
  const made = mkdtempSync(path.join(tmpdir(), 'traces-'))
  t.teardown(() => rmSync(made, { recursive: true, force: true }))
  return made
}

/** The traces in `file`: each line one JSON object, every line whole. */
function tracesIn (file: string): Trace[] {
  if (!existsSync(file)) return []
  const text = readFileSync(file, 'utf8')
  return text === '' ? [] : text.replace(/\n$/, '').split('\n').map((line) => JSON.parse(line) as Trace)
}

const traceOptions = (file: string, options: TraceOptions = {}): ModelTableOptions => ({ trace: { file, level: ['TIMESTAMPS'], rate: 1, ...options } })

/** `table.infer` on `echo`, in this process, over `registry`. */
function inferOf (registry: Registry, table: ModelTable) {
  const wire: InferRequestWire = { inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1], data: [7] }] }
  return () => table.infer('echo', undefined, {
    read: (signature: ModelSignature) => new InferRequest(wire, Buffer.alloc(0), { registry, model: signature }),
    respond: () => 'ok'
  })
}

function local (t: Test, options: ModelTableOptions) {
  const registry = new Registry()
  t.teardown(() => registry.close())
  const table = new ModelTable([echo], options)
  return { table, infer: inferOf(registry, table) }
}

t.test('HTTP, gRPC and a stream: one line each, Triton\'s names, in order, in nanoseconds', async (t) => {
  const file = path.join(directory(t), 'trace.json')
  const table = new ModelTable([echo], traceOptions(file))
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(fastifyTritonShm, { grpc: { port: 0, models: table } })
  await app.register(kserveModels, { models: table })
  const url = await app.listen({ host: '127.0.0.1', port: 0 })
  const port = app.tritonGrpc.port as number
  const input = { name: 'INPUT0', datatype: 'INT32', shape: [2] }

  const answer = await fetch(`${url}/v2/models/echo/infer`, { method: 'POST', body: JSON.stringify({ inputs: [{ ...input, data: [1, 2] }] }) })
  t.equal(answer.status, 200)
  await table.closeTraces()
  t.same(tracesIn(file).map(({ id, model_name: name, model_version: version }) => [id, name, version]), [[1, 'echo', 3]], 'HTTP: the newest version')

  const raw = [Buffer.from(Int32Array.of(3, 4).buffer)]
  await grpcClient(t, port).call('ModelInfer', { model_name: 'echo', model_version: '1', inputs: [input], raw_input_contents: raw })
  await table.closeTraces()
  t.same(tracesIn(file).map(({ id, model_version: version }) => [id, version]), [[1, 3], [2, 1]], 'gRPC: the version asked for')

  const stream = streamClient(t, port)
  stream.write({ model_name: 'echo', inputs: [input], raw_input_contents: raw })
  await stream.until(1)
  await stream.end()
  await app.close()
  const traces = tracesIn(file)
  t.same(traces.map(({ id }) => id), [1, 2, 3], 'the stream\'s request, written when the server stopped')
  for (const { timestamps } of traces) {
    t.same(timestamps.map(({ name }) => name), ACTIVITIES)
    const ns = timestamps.map((timestamp) => BigInt(timestamp.ns))
    t.ok(ns.every((value, index) => index === 0 || value >= ns[index - 1]), 'in the order they happened')
  }
  const [first, last] = [BigInt(traces[0].timestamps[0].ns), BigInt(traces[2].timestamps[6].ns)]
  t.ok(last > first, 'later requests, later instants')
  const text = readFileSync(file, 'utf8')
  t.match(text, /^\{"id":1,"model_name":"echo","model_version":3,"timestamps":\[\{"name":"REQUEST_START","ns":\d+\},/, 'the integers as JSON numbers')
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
  await table.closeTraces()
  t.equal(tracesIn(file).length, 5, 'two more, then none')
  t.equal(table.traceSettings().count, 0, 'none left')

  table.updateTraceSettings('echo', { count: 1 })
  await infer()
  await infer()
  await table.closeTraces()
  t.equal(tracesIn(file).length, 6, 'the model\'s own count: one more')
  table.updateTraceSettings('echo', { level: [] })
  await infer()
  await table.closeTraces()
  t.equal(tracesIn(file).length, 6, 'the model\'s level OFF: none')
})

t.test('tracing off: nothing sampled, no file', async (t) => {
  const file = path.join(directory(t), 'off.json')
  const { table, infer } = local(t, { trace: { file, rate: 1 } })
  await infer()
  await table.closeTraces()
  t.notOk(existsSync(file))
  t.same(table.traceSettings().level, [])
})

t.test('a model with settings of its own is sampled by them, the others by the global ones', async (t) => {
  const made = directory(t)
  const registry = new Registry()
  t.teardown(() => registry.close())
  const other = { ...echo, name: 'other', versions: ['1'] }
  const table = new ModelTable([echo, other], traceOptions(path.join(made, 'global.json'), { logFrequency: 1 }))
  table.updateTraceSettings('other', { rate: 2 })
  const read = (signature: ModelSignature) => new InferRequest({ inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1], data: [1] }] },
    Buffer.alloc(0), { registry, model: signature })
  for (const name of ['echo', 'other', 'other']) await table.infer(name, undefined, { read, respond: () => 'ok' })
  await table.closeTraces()
  t.same(tracesIn(path.join(made, 'global.json')).map(({ model_name: name }) => name), ['echo', 'other'], 'other: its own rate')
})

t.test('a batch of log_frequency traces is one write; what waits is written at stop', async (t) => {
  const file = path.join(directory(t), 'batches.json')
  const traces = new TraceFile(file)
  traces.add('{"id":1}\n', 2)
  await traces.settled()
  t.notOk(existsSync(file), 'one trace of a batch of two: nothing written')
  traces.add('{"id":2}\n', 2)
  await traces.settled()
  t.equal(readFileSync(file, 'utf8'), '{"id":1}\n{"id":2}\n', 'the batch, whole')
  traces.add('{"id":3}\n', 2)
  await traces.settled()
  t.equal(tracesIn(file).length, 2, 'the next batch waits')
  await traces.close()
  t.equal(readFileSync(file, 'utf8'), '{"id":1}\n{"id":2}\n{"id":3}\n', 'written at stop')
  await traces.close()
  traces.add('{"id":4}\n', 0)
  traces.add('{"id":5}\n', 0)
  await traces.flush()
  t.equal(tracesIn(file).length, 5, 'a trace after a stop opens the file again; traces during a write go in the next batch')
  await traces.close()
})

t.test('a batch past 1 MiB is written whatever log_frequency says', async (t) => {
  const file = path.join(directory(t), 'big.json')
  const traces = new TraceFile(file)
  t.teardown(() => traces.close())
  const line = `{"pad":"${'x'.repeat(600 * 1024)}"}\n`
  traces.add(line, 1000)
  await traces.settled()
  t.notOk(existsSync(file))
  traces.add(line, 1000)
  await traces.settled()
  t.equal(tracesIn(file).length, 2)
})

t.test('a file that cannot be written: logged, its traces dropped, opened again by the next trace', async (t) => {
  const made = path.join(directory(t), 'later')
  const file = path.join(made, 'trace.json')
  const logged: object[] = []
  const traces = new TraceFile(file, { error: (details) => { logged.push(details) } })
  traces.add('{"id":1}\n', 0)
  await traces.flush()
  t.match(logged, [{ err: { code: 'ENOENT' }, file }], 'logged with the file')
  mkdirSync(made)
  traces.add('{"id":2}\n', 0)
  await traces.close()
  t.equal(readFileSync(file, 'utf8'), '{"id":2}\n', 'the dropped trace is not written')
  const writeFailed = new TraceFile('/dev/full', { error: (details) => { logged.push(details) } })
  writeFailed.add('{"id":3}\n', 0)
  await writeFailed.close()
  t.match(logged[1], { err: { code: 'ENOSPC' } }, 'a write that fails: logged, the file closed')
})

t.test('settings another process of the store changed apply to the next request', async (t) => {
  const store = storePath(t)
  const file = path.join(directory(t), 'shared.json')
  const [one, two] = [0, 1].map(() => {
    const registry = new Registry({ sharedRegistry: { path: store, checkIntervalMs: 1000 } })
    t.teardown(() => registry.close())
    const table = new ModelTable([echo], { trace: { file, rate: 1 } })
    table.serveWith(registry)
    return { table, infer: inferOf(registry, table) }
  })
  await two.infer()
  one.table.updateTraceSettings(undefined, { level: ['TIMESTAMPS'] })
  await two.infer()
  await two.table.closeTraces()
  t.equal(tracesIn(file).length, 1, 'traced in the other process from its next request')
})
