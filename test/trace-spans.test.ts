/**
 * Triton's OpenTelemetry trace mode (`trace.mode: 'opentelemetry'`): the spans of sampled requests
 * (InferRequest, the model's, compute), as Triton's tracer names them, recorded by the host's
 * registered provider (the SDK's, in memory here) for HTTP infer and generate, gRPC ModelInfer and
 * ModelStreamInfer; their parent the client's `traceparent` (which traces a request whatever the
 * rate, as in Triton), or the host's active span; rate and count honoured; failed requests; the
 * shared memory API's register and unregister calls; no provider; the package missing.
 */
import {
  context, INVALID_SPAN_CONTEXT, propagation, type Span, SpanKind, SpanStatusCode, trace, type TextMapPropagator
} from '@opentelemetry/api'
import { FastifyOtelInstrumentation } from '@fastify/otel'
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks'
import { W3CTraceContextPropagator } from '@opentelemetry/core'
import { BasicTracerProvider, InMemorySpanExporter, type ReadableSpan, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base'
import Fastify from 'fastify'
import t, { type Test } from 'tap'
import fastifyTritonShm, {
  type FastifyTritonShmOptions, InferRequest, kserveModels, ModelTable, type ModelTableOptions, Registry, type TraceOptions
} from '../lib/index'
import type { InferRequestWire, ModelSignature } from '../types'
import { modelInferHandler } from '../lib/grpc'
import { grpcClient, startServer } from './helpers/grpc'
import { makeObject } from './helpers/shm'
import { streamClient } from './helpers/stream'
import { echo, outer, pair } from './helpers/traced-models'

const CLIENT_TRACE = '0af7651916cd43dd8448eb211c12666c'
const CLIENT_SPAN = 'b7ad6b7169242424'
/** Triton's QA suite's client context (opentelemetry_unittest.py). */
const TRACEPARENT = `00-${CLIENT_TRACE}-${CLIENT_SPAN}-01`

/** The host's OpenTelemetry SDK: a provider recording in memory, the W3C propagator (unless
 * `propagator` is false), and an async context manager; all unregistered when the test ends. */
function hostSdk (t: Test, propagator: TextMapPropagator | false = new W3CTraceContextPropagator()) {
  const exporter = new InMemorySpanExporter()
  // Told of each span that ends: a request's spans are made once its answer is sent, which may
  // be after its client has it.
  let ended: () => void = () => {}
  class Recording extends SimpleSpanProcessor {
    override onEnd (span: ReadableSpan): void {
      super.onEnd(span)
      ended()
    }
  }
  const provider = new BasicTracerProvider({ spanProcessors: [new Recording(exporter)] })
  trace.setGlobalTracerProvider(provider)
  if (propagator !== false) propagation.setGlobalPropagator(propagator)
  const contextManager = new AsyncLocalStorageContextManager().enable()
  context.setGlobalContextManager(contextManager)
  t.teardown(async () => {
    await provider.shutdown()
    trace.disable()
    propagation.disable()
    context.disable()
    contextManager.disable()
  })
  return {
    provider,
    /** The spans ended so far, oldest first; first, those until `done` holds of them. */
    spans: async (done: (spans: ReadableSpan[]) => boolean = () => true): Promise<ReadableSpan[]> => {
      const spanEnded = () => new Promise<void>((resolve) => { ended = resolve })
      for (;;) {
        const next = spanEnded()
        await provider.forceFlush()
        if (done(exporter.getFinishedSpans())) return exporter.getFinishedSpans()
        await next
      }
    },
    reset: () => exporter.reset()
  }
}

const otel = (options: TraceOptions = {}): ModelTableOptions => ({ trace: { mode: 'opentelemetry', level: ['TIMESTAMPS'], rate: 1, ...options } })

const named = (spans: ReadableSpan[], name: string) => spans.filter((span) => span.name === name)
const eventNames = (span: ReadableSpan) => span.events.map(({ name }) => name)
const parentOf = (span: ReadableSpan) => span.parentSpanContext?.spanId
/** `sdk.spans`' wait for `count` requests' spans (their InferRequest span ends last). */
const requestsEnded = (count: number) => (spans: ReadableSpan[]) => named(spans, 'InferRequest').length >= count
/** An instant in nanoseconds since the epoch. */
const ns = ([seconds, nanoseconds]: [number, number]) => BigInt(seconds) * 1_000_000_000n + BigInt(nanoseconds)

/** The three spans of each request, checked to nest as Triton's do; returned by request. */
function requests (t: Test, spans: ReadableSpan[]) {
  return named(spans, 'InferRequest').map((request) => {
    const model = spans.find((span) => parentOf(span) === request.spanContext().spanId) as ReadableSpan
    const compute = spans.find((span) => parentOf(span) === model?.spanContext().spanId)
    t.equal(model.name, 'echo', 'the model\'s span, under InferRequest')
    return { request, model, compute }
  })
}

/** `table.infer` on `echo` in this process, with `headers` as its trace carrier (none: no carrier). */
function localInfer (registry: Registry, table: ModelTable, headers?: Record<string, string>, value = 7, model = 'echo') {
  const wire: InferRequestWire = { inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1], data: [value] }] }
  return table.infer(model, undefined, {
    read: (signature: ModelSignature) => new InferRequest(wire, Buffer.alloc(0), { registry, model: signature }),
    respond: () => 'ok',
    ...(headers !== undefined && { traceCarrier: () => headers })
  })
}

function local (t: Test, options: ModelTableOptions) {
  const registry = new Registry()
  t.teardown(() => registry.close())
  return { registry, table: new ModelTable([echo, pair, outer], options) }
}

async function serve (t: Test, options: ModelTableOptions, pluginOptions: FastifyTritonShmOptions = {}) {
  const table = new ModelTable([echo], options)
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(fastifyTritonShm, { ...pluginOptions, grpc: { port: 0, models: table } })
  await app.register(kserveModels, { models: table })
  const url = await app.listen({ host: '127.0.0.1', port: 0 })
  return { app, table, url, port: app.tritonGrpc.port as number }
}

const input = { name: 'INPUT0', datatype: 'INT32', shape: [2] }
const raw = [Buffer.from(Int32Array.of(3, 4).buffer)]

t.test('ModelInfer through grpc-js (a host\'s own server, modelInferHandler): in the client\'s trace too', async (t) => {
  const sdk = hostSdk(t)
  const registry = new Registry()
  t.teardown(() => registry.close())
  const table = new ModelTable([echo], otel({ rate: 1000 }))
  const port = await startServer(t, { ModelInfer: modelInferHandler({ registry, models: table }) })
  await grpcClient(t, port).call('ModelInfer', { model_name: 'echo', inputs: [input], raw_input_contents: raw }, { traceparent: TRACEPARENT })
  const [{ request }] = requests(t, await sdk.spans(requestsEnded(1)))
  t.same([request.spanContext().traceId, parentOf(request)], [CLIENT_TRACE, CLIENT_SPAN], 'under the client\'s span, from its metadata')
})

t.test('HTTP, generate, gRPC and a stream: Triton\'s three spans, in the client\'s trace, whatever the rate', async (t) => {
  const sdk = hostSdk(t)
  // A rate no request reaches: only the client's trace context traces them, as in Triton.
  const { url, port } = await serve(t, otel({ rate: 1000 }))
  const traced = { traceparent: TRACEPARENT, tracestate: 'vendor=1' }

  const answer = await fetch(`${url}/v2/models/echo/infer`, {
    method: 'POST', headers: traced, body: JSON.stringify({ id: 'r1', inputs: [{ ...input, data: [1, 2] }] })
  })
  t.equal(answer.status, 200)
  const generated = await fetch(`${url}/v2/models/echo/generate`, { method: 'POST', headers: traced, body: JSON.stringify({ INPUT0: [5] }) })
  t.equal(generated.status, 200)
  await grpcClient(t, port).call('ModelInfer', { model_name: 'echo', model_version: '1', inputs: [input], raw_input_contents: raw }, traced)
  const stream = streamClient(t, port, traced)
  stream.write({ model_name: 'echo', id: 's1', inputs: [input], raw_input_contents: raw })
  await stream.until(1)
  await stream.end()
  const untraced = await fetch(`${url}/v2/models/echo/infer`, { method: 'POST', body: JSON.stringify({ inputs: [{ ...input, data: [1, 2] }] }) })
  t.equal(untraced.status, 200)

  const spans = await sdk.spans(requestsEnded(4))
  t.equal(spans.length, 12, 'three spans for each of the four requests the client traced, none for the fifth')
  const found = requests(t, spans)
  t.same(found.map(({ model }) => [model.attributes['triton.model_version'], model.attributes['triton.request_id']]),
    [[3, 'r1'], [3, undefined], [1, undefined], [3, 's1']], 'HTTP, generate, gRPC, stream: each version, the request id when given')
  for (const { request, model, compute } of found) {
    t.equal(request.spanContext().traceId, CLIENT_TRACE, 'the client\'s trace')
    t.equal(parentOf(request), CLIENT_SPAN, 'under the client\'s span')
    t.equal(request.spanContext().traceState?.serialize(), 'vendor=1', 'its tracestate carried on')
    t.same([request.kind, model.kind, compute?.kind], [SpanKind.SERVER, SpanKind.SERVER, SpanKind.SERVER])
    t.equal(request.instrumentationScope.name, 'triton-server', 'Triton\'s tracer name')
    t.same(eventNames(model), ['REQUEST_START', 'QUEUE_START', 'REQUEST_END'])
    t.same(eventNames(compute as ReadableSpan), ['COMPUTE_START', 'COMPUTE_INPUT_END', 'COMPUTE_OUTPUT_START', 'COMPUTE_END'])
    t.match(model.attributes, { 'triton.model_name': 'echo', 'triton.trace_parent_id': 0 })
    t.equal(model.status.code, SpanStatusCode.UNSET)
    // Triton's order: REQUEST_START, QUEUE_START, then the compute span's, then REQUEST_END.
    const [requestStart, queueStart, requestEnd] = model.events.map(({ time }) => ns(time))
    const times = [ns(request.startTime), requestStart, ns(model.startTime), queueStart, ns((compute as ReadableSpan).startTime),
      ...(compute as ReadableSpan).events.map(({ time }) => ns(time)), ns((compute as ReadableSpan).endTime), requestEnd, ns(model.endTime), ns(request.endTime)]
    t.ok(times.every((time, index) => index === 0 || time >= times[index - 1]), 'every span within its parent, every event in order')
  }
  t.same(found.map(({ model }) => model.attributes['triton.trace_id']), [1, 2, 3, 4], 'Triton\'s trace ids, counted from 1')
  const http = ['HTTP_RECV_START', 'HTTP_RECV_END', 'INFER_RESPONSE_COMPLETE', 'HTTP_SEND_START', 'HTTP_SEND_END']
  const grpc = ['GRPC_WAITREAD_START', 'GRPC_WAITREAD_END', 'INFER_RESPONSE_COMPLETE', 'GRPC_SEND_START', 'GRPC_SEND_END']
  t.same(found.map(({ request }) => eventNames(request)), [http, http, grpc, grpc], 'InferRequest: the face\'s instants, as Triton\'s front ends add them')
  for (const { request, model } of found) {
    const [received, , , , sent] = request.events.map(({ time }) => ns(time))
    t.same([ns(request.startTime), ns(request.endTime)], [received, sent], 'InferRequest: from its arrival until it was sent')
    t.ok(received <= ns(model.startTime) && ns(model.endTime) <= sent)
  }
})

t.test('without the client\'s trace context: rate and count honoured; the level OFF traces nothing, even a client\'s', async (t) => {
  const sdk = hostSdk(t)
  const { registry, table } = local(t, otel({ rate: 3 }))
  for (let index = 0; index < 9; index++) await localInfer(registry, table, {})
  t.equal(named(await sdk.spans(), 'InferRequest').length, 3, 'the 3rd, 6th and 9th of 9')

  table.updateTraceSettings(undefined, { rate: 1, count: 2 })
  for (let index = 0; index < 4; index++) await localInfer(registry, table)
  t.equal(named(await sdk.spans(), 'InferRequest').length, 5, 'two more, then none')
  t.equal(table.traceSettings().count, 0, 'none left')
  await localInfer(registry, table, { traceparent: TRACEPARENT })
  t.equal(named(await sdk.spans(), 'InferRequest').length, 6, 'a client\'s trace context is traced with the count used up')

  table.updateTraceSettings(undefined, { rate: 2, count: 1 })
  await localInfer(registry, table, { traceparent: TRACEPARENT })
  await localInfer(registry, table, { traceparent: TRACEPARENT })
  await localInfer(registry, table)
  t.equal(named(await sdk.spans(), 'InferRequest').length, 8, 'forced requests count towards the rate: the second took the count')
  t.equal(table.traceSettings().count, 0)

  table.updateTraceSettings(undefined, { level: [] })
  await localInfer(registry, table, { traceparent: TRACEPARENT })
  t.equal(named(await sdk.spans(), 'InferRequest').length, 8, 'OFF: none')
})

t.test('a rate of 0 at start traces the requests that carry their client\'s trace context only', async (t) => {
  const sdk = hostSdk(t)
  const { registry, table } = local(t, otel({ rate: 0 }))
  await localInfer(registry, table)
  await localInfer(registry, table, { traceparent: TRACEPARENT })
  const spans = named(await sdk.spans(), 'InferRequest')
  t.equal(spans.length, 1)
  t.equal(spans[0].spanContext().traceId, CLIENT_TRACE)
  t.same(table.traceSettings().mode, 'opentelemetry', 'the mode, as Triton answers it')
  t.equal(table.traceSettings().file, '', 'no file needed')
})

t.test('a host with @fastify/otel: the spans under its route\'s, in the client\'s trace or in its own', async (t) => {
  const sdk = hostSdk(t)
  const table = new ModelTable([echo], otel({ rate: 1000 }))
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(new FastifyOtelInstrumentation().plugin())
  await app.register(fastifyTritonShm)
  await app.register(kserveModels, { models: table })
  const url = await app.listen({ host: '127.0.0.1', port: 0 })
  const infer = (headers: Record<string, string>) =>
    fetch(`${url}/v2/models/echo/infer`, { method: 'POST', headers, body: JSON.stringify({ inputs: [{ ...input, data: [1, 2] }] }) })

  t.equal((await infer({ traceparent: TRACEPARENT })).status, 200)
  // The host's route spans end as their responses are sent, as the package's request spans do.
  const routesEnded = (count: number) => (spans: ReadableSpan[]) => requestsEnded(1)(spans) && named(spans, 'request').length >= count
  const spans = await sdk.spans(routesEnded(1))
  const [request] = named(spans, 'InferRequest')
  const parent = spans.find((span) => span.spanContext().spanId === parentOf(request)) as ReadableSpan
  t.equal(parent.instrumentationScope.name, '@fastify/otel', 'under a span of the host\'s route')
  t.equal(parent.spanContext().traceId, CLIENT_TRACE, 'which continues the client\'s trace')
  const route = named(spans, 'request')[0]
  t.equal(parentOf(route), CLIENT_SPAN, 'the route\'s span under the client\'s')
  t.equal(request.spanContext().traceId, CLIENT_TRACE)

  sdk.reset()
  t.equal((await infer({})).status, 200)
  t.equal(named(await sdk.spans(), 'InferRequest').length, 0, 'no client\'s context: the rate decides (not reached)')
  table.updateTraceSettings(undefined, { rate: 1 })
  t.equal((await infer({})).status, 200)
  const own = await sdk.spans(routesEnded(2))
  const [alone] = named(own, 'InferRequest')
  const host = own.find((span) => span.spanContext().spanId === parentOf(alone))
  t.equal(host?.instrumentationScope.name, '@fastify/otel', 'no client\'s context: under the route\'s span')
  t.equal(alone.spanContext().traceId, named(own, 'request')[1].spanContext().traceId, 'in the route\'s trace')
  t.not(alone.spanContext().traceId, CLIENT_TRACE)
})

t.test('the parent: the host\'s active span without a client\'s context, or when it continues the client\'s trace', async (t) => {
  const sdk = hostSdk(t)
  const { registry, table } = local(t, otel())
  const tracer = trace.getTracer('host')
  const underRoute = (route: Span, headers?: Record<string, string>) => context.with(trace.setSpan(context.active(), route), () => localInfer(registry, table, headers))

  const route = tracer.startSpan('route')
  await underRoute(route)
  const continuing = tracer.startSpan('continuing', {}, trace.setSpanContext(context.active(), { traceId: CLIENT_TRACE, spanId: CLIENT_SPAN, traceFlags: 1 }))
  await underRoute(continuing, { traceparent: TRACEPARENT })
  const elsewhere = tracer.startSpan('elsewhere')
  await underRoute(elsewhere, { traceparent: TRACEPARENT })
  await localInfer(registry, table)
  for (const span of [route, continuing, elsewhere]) span.end()

  const [first, second, third, fourth] = named(await sdk.spans(), 'InferRequest')
  t.equal(parentOf(first), route.spanContext().spanId, 'no client\'s context: under the active span')
  t.equal(first.spanContext().traceId, route.spanContext().traceId)
  t.equal(parentOf(second), continuing.spanContext().spanId, 'the host continues the client\'s trace: under its span')
  t.equal(parentOf(third), CLIENT_SPAN, 'the active span is of another trace: under the client\'s span')
  t.equal(third.spanContext().traceId, CLIENT_TRACE)
  t.equal(parentOf(fourth), undefined, 'neither: a root span')
})

t.test('a propagator that reads no valid context: not the client\'s, and not forced', async (t) => {
  const invalid: TextMapPropagator = { inject () {}, extract: (carried) => trace.setSpanContext(carried, INVALID_SPAN_CONTEXT), fields: () => [] }
  const sdk = hostSdk(t, invalid)
  const { registry, table } = local(t, otel({ rate: 2 }))
  await localInfer(registry, table, { traceparent: TRACEPARENT })
  t.equal((await sdk.spans()).length, 0, 'the first of two, not forced')
  await localInfer(registry, table, { traceparent: TRACEPARENT })
  t.equal(parentOf(named(await sdk.spans(), 'InferRequest')[0]), undefined, 'a root span')
})

t.test('a propagator that throws: no client\'s context, the request served', async (t) => {
  const throwing: TextMapPropagator = { inject () {}, extract: () => { throw new Error('the propagator failed') }, fields: () => [] }
  const sdk = hostSdk(t, throwing)
  const { registry, table } = local(t, otel())
  t.equal(await localInfer(registry, table, { traceparent: TRACEPARENT }), 'ok')
  t.equal(parentOf(named(await sdk.spans(), 'InferRequest')[0]), undefined, 'a root span')
})

t.test('the API alone (no propagator registered): the client\'s context is not read', async (t) => {
  const sdk = hostSdk(t, false)
  const { registry, table } = local(t, otel({ rate: 2 }))
  await localInfer(registry, table, { traceparent: TRACEPARENT })
  t.equal((await sdk.spans()).length, 0, 'not forced: the first of two')
})

t.test('an ensemble: its steps traced with it, under its span, as Triton nests them; no compute span of its own', async (t) => {
  const sdk = hostSdk(t)
  const { registry, table } = local(t, otel({ rate: 2 }))
  await localInfer(registry, table, undefined, 7, 'pair')
  t.equal((await sdk.spans()).length, 0, 'the first of two: neither it nor its steps, whatever their own sampling')
  await localInfer(registry, table, undefined, 7, 'pair')
  const spans = await sdk.spans()
  const byId = (id: string | undefined) => spans.find((span) => span.spanContext().spanId === id) as ReadableSpan
  t.same(spans.map((span) => [span.name, byId(parentOf(span))?.name]).sort(), [
    ['InferRequest', undefined], ['compute', 'echo'], ['compute', 'echo'], ['echo', 'pair'], ['echo', 'pair'], ['pair', 'InferRequest']
  ], 'InferRequest, the ensemble\'s span, each step\'s span and its compute under it')
  const [ensemble] = named(spans, 'pair')
  t.same(named(spans, 'echo').map((span) => span.attributes['triton.trace_parent_id']),
    [ensemble.attributes['triton.trace_id'], ensemble.attributes['triton.trace_id']], 'the steps name their ensemble\'s trace')
  t.equal(ensemble.attributes['triton.trace_parent_id'], 0)
  const ns0 = (span: ReadableSpan) => [ns(span.startTime), ns(span.endTime)]
  for (const step of named(spans, 'echo')) {
    t.ok(ns0(step)[0] >= ns0(ensemble)[0] && ns0(step)[1] <= ns0(ensemble)[1], 'each step within its ensemble')
  }

  sdk.reset()
  table.updateTraceSettings(undefined, { rate: 1 })
  await localInfer(registry, table, undefined, 7, 'outer')
  const nested = await sdk.spans()
  t.same(nested.map(({ name }) => name).filter((name) => name !== 'compute').sort(), ['InferRequest', 'echo', 'echo', 'outer', 'pair'], 'nested ensembles nest')
  const inner = named(nested, 'pair')[0]
  t.equal(parentOf(inner), named(nested, 'outer')[0].spanContext().spanId)

  sdk.reset()
  await t.rejects(localInfer(registry, table, undefined, -1, 'pair'), { message: 'the model failed' })
  const failed = await sdk.spans()
  t.same(failed.map(({ name, status }) => [name, status.code]).sort(), [
    ['InferRequest', SpanStatusCode.ERROR], ['compute', SpanStatusCode.UNSET], ['echo', SpanStatusCode.ERROR], ['pair', SpanStatusCode.ERROR]
  ], 'a step that fails: its span and its ensemble\'s carry the error; its compute ended as it failed')
  t.equal(parentOf(named(failed, 'echo')[0]), named(failed, 'pair')[0].spanContext().spanId)
})

t.test('a failed request: its spans end with the error recorded', async (t) => {
  const sdk = hostSdk(t)
  const { url, port } = await serve(t, otel())
  const failed = await fetch(`${url}/v2/models/echo/infer`, { method: 'POST', body: JSON.stringify({ inputs: [{ ...input, shape: [1], data: [-1] }] }) })
  t.equal(failed.status, 500)
  await grpcClient(t, port).fail('ModelInfer', { model_name: 'echo', inputs: [{ ...input, shape: [1] }], raw_input_contents: [Buffer.from(Int32Array.of(-2).buffer)] })
  const unread = await fetch(`${url}/v2/models/echo/infer`, { method: 'POST', body: JSON.stringify({ inputs: [{ ...input, datatype: 'FP32', data: [1, 2] }] }) })
  t.equal(unread.status, 400, 'its inputs could not be read')

  const spans = await sdk.spans(requestsEnded(3))
  t.equal(spans.length, 8, 'InferRequest and the model\'s span each; compute for the two that reached their model')
  t.equal(named(spans, 'compute').length, 2)
  const messages = named(spans, 'echo').map((span) => span.status)
  t.match(messages, [
    { code: SpanStatusCode.ERROR, message: 'the model failed' },
    { code: SpanStatusCode.ERROR, message: 'a text thrown' },
    { code: SpanStatusCode.ERROR, message: /unexpected datatype|FP32/ }
  ])
  t.same(named(spans, 'echo').map(eventNames), [
    ['REQUEST_START', 'QUEUE_START', 'exception', 'REQUEST_END'],
    ['REQUEST_START', 'QUEUE_START', 'exception', 'REQUEST_END'],
    ['REQUEST_START', 'exception', 'REQUEST_END']
  ], 'the instants each reached')
  t.same(named(spans, 'InferRequest').map((span) => span.status.code), [SpanStatusCode.ERROR, SpanStatusCode.ERROR, SpanStatusCode.ERROR])
})

t.test('no provider registered: the API\'s no-op, nothing recorded, nothing fails', async (t) => {
  const { registry, table } = local(t, otel())
  t.equal(await localInfer(registry, table, { traceparent: TRACEPARENT }), 'ok')
  t.equal(await localInfer(registry, table, {}, -1).catch((error: Error) => error.message), 'the model failed')
})

t.test('register and unregister over HTTP and gRPC are spans, refusals with their error; status and the level OFF none', async (t) => {
  const sdk = hostSdk(t)
  const { url, port, table } = await serve(t, otel())
  const key = makeObject(t, 4096, 'otel')
  const traced = { traceparent: TRACEPARENT }
  const post = (path: string, body?: object) => fetch(`${url}${path}`, { method: 'POST', headers: traced, ...(body !== undefined && { body: JSON.stringify(body) }) })

  t.equal((await post('/v2/systemsharedmemory/region/good/register', { key, offset: 0, byte_size: 64 })).status, 200)
  t.equal((await post('/v2/systemsharedmemory/region/bad/register', { key: '/no-such-object-otel', offset: 0, byte_size: 64 })).status, 400)
  t.equal((await fetch(`${url}/v2/systemsharedmemory/status`)).status, 200)
  t.equal((await post('/v2/systemsharedmemory/region/good/unregister')).status, 200)
  t.equal((await post('/v2/cudasharedmemory/unregister')).status, 200)
  const client = grpcClient(t, port)
  await client.fail('CudaSharedMemoryRegister', { name: 'gpu', raw_handle: Buffer.alloc(64), device_id: 0, byte_size: 64 })
  await client.call('SystemSharedMemoryRegister', { name: 'again', key, offset: 0, byte_size: 64 }, traced)
  await client.call('SystemSharedMemoryUnregister', { name: '' })
  await client.call('SystemSharedMemoryStatus', { name: '' })

  const spans = await sdk.spans()
  t.same(spans.map(({ name, attributes, status }) => [name, attributes['triton.region_name'], status.code]), [
    ['SystemSharedMemoryRegister', 'good', SpanStatusCode.UNSET],
    ['SystemSharedMemoryRegister', 'bad', SpanStatusCode.ERROR],
    ['SystemSharedMemoryUnregister', 'good', SpanStatusCode.UNSET],
    ['CudaSharedMemoryUnregister', undefined, SpanStatusCode.UNSET],
    ['CudaSharedMemoryRegister', 'gpu', SpanStatusCode.ERROR],
    ['SystemSharedMemoryRegister', 'again', SpanStatusCode.UNSET],
    ['SystemSharedMemoryUnregister', undefined, SpanStatusCode.UNSET]
  ], 'one span per call, in order; the status RPC none')
  const [, refused] = spans
  t.match(refused.status.message, /no-such-object-otel/, 'the refusal\'s message')
  t.same(eventNames(refused), ['exception'])
  t.equal(parentOf(refused), CLIENT_SPAN, 'under the client\'s span')
  t.equal(spans[5].spanContext().traceId, CLIENT_TRACE, 'gRPC metadata too')

  sdk.reset()
  table.updateTraceSettings(undefined, { level: [] })
  t.equal((await post('/v2/systemsharedmemory/region/bad/register', { key: '/no-such-object-otel', offset: 0, byte_size: 64 })).status, 400)
  await client.call('SystemSharedMemoryUnregister', { name: '' })
  t.equal((await sdk.spans()).length, 0, 'the level OFF: none')
})

t.test('calls the switch or the restricted API refuses before their handler: spans with the refusal', async (t) => {
  const sdk = hostSdk(t)
  const { url, port } = await serve(t, otel(), { allowClientShm: false, restrictedApi: { header: 'shm-key', value: 'yes' } })
  const register = (headers: Record<string, string>) => fetch(`${url}/v2/systemsharedmemory/region/r/register`, {
    method: 'POST', headers, body: JSON.stringify({ key: '/k', offset: 0, byte_size: 64 })
  })
  t.equal((await register({ 'shm-key': 'yes' })).status, 501, 'switched off')
  t.equal((await register({})).status, 403, 'restricted')
  const client = grpcClient(t, port)
  await client.fail('SystemSharedMemoryUnregister', { name: 'r' }, { 'shm-key': 'yes' })
  await client.fail('SystemSharedMemoryRegister', { name: 'r', key: '/k', offset: 0, byte_size: 64 })
  const spans = await sdk.spans()
  t.same(spans.map(({ name, status }) => [name, status.code]), [
    ['SystemSharedMemoryRegister', SpanStatusCode.ERROR],
    ['SystemSharedMemoryRegister', SpanStatusCode.ERROR],
    ['SystemSharedMemoryUnregister', SpanStatusCode.ERROR],
    ['SystemSharedMemoryRegister', SpanStatusCode.ERROR]
  ])
  const disabled = "Client shared memory is disabled. Register the plugin with 'allowClientShm: true' to enable."
  t.same(spans.map(({ status }) => status.message), [disabled, "This API is restricted, expecting header 'shm-key'", disabled, "This protocol is restricted, expecting header 'shm-key'"],
    'each refusal\'s text')
})

t.test('the package missing: the table is refused with an error naming it', async (t) => {
  const missing = (name: string) => { throw Object.assign(new Error(`Cannot find module '${name}'`), { code: 'MODULE_NOT_FOUND' }) }
  t.throws(() => new ModelTable([echo], otel({ load: missing })), {
    code: 'ERR_SHM_MISSING_PEER_DEPENDENCY',
    message: "fastify-triton-shm: trace mode opentelemetry needs the package '@opentelemetry/api': npm install @opentelemetry/api"
  })
  let asked = false
  const table = new ModelTable([echo], { trace: { load: () => { asked = true } } })
  t.equal(table.traceSettings().mode, 'triton')
  t.notOk(asked, 'triton mode never loads it')
  t.throws(() => new ModelTable([echo], { trace: { mode: 'jaeger' as 'triton' } }), { code: 'ERR_SHM_INVALID_OPTION' })
})
