/**
 * What the plugin's gRPC listener receives, bounded before grpc-js holds it, over real connections
 * on 127.0.0.1: a paused stream reads no more (what its client goes on writing waits in HTTP/2
 * flow control), every message of every RPC is charged to the in-flight budget as it arrives,
 * before it is decoded, and given back when its call is over, and a compressed one costs at most
 * 4 times its inflated size while it is inflated and decoded.
 */
import { status } from '@grpc/grpc-js'
import t, { type Test } from 'tap'
import { type GrpcListener, listenGrpc } from '../lib/grpc/grpc-server'
import type { GrpcListenerOptions } from '../lib/grpc/listener-options'
import { inferenceService } from '../lib/grpc'
import { allowedDecodedBytes } from '../lib/grpc/decoded-cost'
import { type ModelDeclaration, ModelTable, Registry } from '../lib/index'
import { SharedMemoryApi } from '../lib/registry/shared-memory-api'
import { collectGarbage } from './helpers/observe'
import { type Compression, delimited, framed, rawGrpc, rawStream, varintField } from './helpers/raw-grpc'
import { eventually, Gate, whenEvent } from './helpers/sync'

const MiB = 1024 ** 2
const KiB = 1024

/** `inference.GRPCInferenceService/<method>`'s request, encoded as grpc-js would. */
const encoded = (method: string, request: object): Buffer =>
  (inferenceService().service[method].requestSerialize as (value: object) => Buffer)(request)

/** A field no request has (number 100), `byteSize` bytes of zeros: protobuf skips it, so any
 * request grows by it and means the same. */
const padding = (byteSize: number): Buffer => delimited(100, Buffer.alloc(byteSize))

/** `simple`: an INT32 [-1] in and out, each run held at `gate` until it opens. */
const held = (gate: Gate): ModelDeclaration => ({
  name: 'held',
  inputs: [{ name: 'IN', datatype: 'INT32', shape: [-1] }],
  outputs: [{ name: 'OUT', datatype: 'INT32', shape: [1] }],
  async run (infer) {
    await gate.pass()
    infer.output<Int32Array>('OUT', [1])[0] = 1
  }
})

/** UINT8 [-1] in (read in place, never copied), its byte count out: what it costs is its message. */
const sink: ModelDeclaration = {
  name: 'sink',
  inputs: [{ name: 'IN', datatype: 'UINT8', shape: [-1] }],
  outputs: [{ name: 'OUT', datatype: 'INT32', shape: [1] }],
  run (infer) {
    infer.output<Int32Array>('OUT', [1])[0] = infer.input<Uint8Array>('IN').data.length
  }
}

const sinkRequest = (byteSize: number, fill = 1) => ({
  model_name: 'sink',
  inputs: [{ name: 'IN', datatype: 'UINT8', shape: [byteSize] }],
  raw_input_contents: [Buffer.alloc(byteSize, fill)]
})

const silent = { error () {}, warn () {} }

/** The plugin's listener (as the `grpc` option starts it) on a registry of `maxInFlightBytes`;
 * closed when the test ends. */
async function listening (t: Test, models: ModelDeclaration[], maxInFlightBytes: number, table = {}, options: GrpcListenerOptions = {}):
Promise<{ registry: Registry, listener: GrpcListener }> {
  const registry = new Registry({ maxInFlightBytes })
  const listener = await listenGrpc({ port: 0, models: new ModelTable(models, table), ...options },
    { api: new SharedMemoryApi(registry, { clientShmAccess: 'any' }), log: silent })
  t.teardown(async () => {
    await listener.close()
    registry.close()
  })
  return { registry, listener }
}

t.test('a paused stream reads no more: its client\'s next requests wait in HTTP/2 flow control, the server holds no more than its budget', async (t) => {
  const budget = 32 * MiB
  const gate = new Gate(false)
  const { registry, listener } = await listening(t, [held(gate), sink], budget)
  const { streams } = listener
  const raw = rawGrpc(t, listener.port as number)
  const stream = rawStream(raw, 'ModelStreamInfer')
  const small = framed(encoded('ModelStreamInfer', { model_name: 'held', inputs: [{ name: 'IN', datatype: 'INT32', shape: [1] }], raw_input_contents: [Buffer.alloc(4)] }))
  for (let index = 0; index < 64; index++) stream.write(small)
  await gate.untilHeld(64)
  // Its 64 requests unanswered: the stream paused, and grpc-js's next read is held.
  await whenEvent(streams, 'change', () => streams.counters().held === 1, 'the paused stream\'s next read held')
  t.match(streams.counters(), { streams: 1, requestsInFlight: 64, paused: 1, held: 1 })

  const large = framed(encoded('ModelStreamInfer', sinkRequest(7 * MiB)))
  const charged = registry.inFlight.heldBytes
  collectGarbage()
  const before = process.memoryUsage().arrayBuffers
  // 16 requests of 7 MiB, 3.5 times the budget, from one buffer: what the client holds is one.
  const count = 16
  for (let index = 0; index < count; index++) stream.write(large)
  // A call on the same connection, answered once the server took in what its client sent before it.
  t.equal((await raw.call('ServerLive', framed(Buffer.alloc(0)))).status, status.OK)
  t.same(stream.written, { messages: 64, bytes: 64 * small.length }, 'flow control let not one large request through whole')
  t.equal(registry.inFlight.heldBytes, charged, 'none of them was charged: none was read')
  t.equal(streams.counters().requestsInFlight, 64)
  collectGarbage()
  const grown = process.memoryUsage().arrayBuffers - before
  t.ok(grown < budget / 4, `the process's external memory grew by ${(grown / MiB).toFixed(1)} MiB while ${count * 7} MiB were written`)

  gate.open()
  await stream.until(64 + count)
  t.equal((await stream.end()).status, status.OK, 'every request answered once the runs went on, then the stream ended')
  t.ok(registry.inFlight.peakBytes <= budget, `at most the budget held at once (${registry.inFlight.peakBytes})`)
  await eventually(() => registry.inFlight.heldBytes === 0, 'something was still held')
  t.pass('nothing held once the stream is over')
})

/** `message` as a frame of `compression`, with the encoding that goes with it. */
const sent = (message: Buffer, compression: Compression) => ({ body: framed(message, compression), options: { compression } })

t.test('gzip and deflate messages of several sizes to every kind of RPC: served, each holding at most 4 times its inflated size', async (t) => {
  const budget = 64 * MiB
  const { registry, listener } = await listening(t, [sink], budget, { repository: true })
  const { inFlight } = registry
  const raw = rawGrpc(t, listener.port as number)
  const ok = (answer: { status?: number, details?: string }, what: string) => t.equal(answer.status, status.OK, `${what}: ${answer.details ?? 'OK'}`)
  for (const byteSize of [KiB, 256 * KiB, 4 * MiB]) {
    for (const compression of ['gzip', 'deflate'] as const) {
      const what = `${byteSize / KiB} KiB, ${compression}`
      const infer = sent(encoded('ModelInfer', sinkRequest(byteSize, 0)), compression)
      ok(await raw.call('ModelInfer', infer.body, infer.options), `ModelInfer, ${what}`)
      const stream = rawStream(raw, 'ModelStreamInfer', compression)
      stream.write(infer.body)
      stream.write(infer.body)
      await stream.until(2)
      ok(await stream.end(), `ModelStreamInfer, two requests of ${what}`)
      for (const method of ['RepositoryIndex', 'SystemSharedMemoryStatus']) {
        const request = sent(Buffer.concat([encoded(method, {}), padding(byteSize)]), compression)
        ok(await raw.call(method, request.body, request.options), `${method}, ${what}`)
      }
      // Its bytes, then its decoded form; the answer's own are charged with it as ModelInfer's
      // request charges them (one INT32 here).
      t.ok(inFlight.peakBytes <= 4 * byteSize + MiB, `${what}: at most ${inFlight.peakBytes} bytes held at once`)
    }
  }
  const empty = sent(Buffer.alloc(0), 'gzip')
  ok(await raw.call('ServerLive', empty.body, empty.options), 'ServerLive, an empty message compressed')
  await eventually(() => inFlight.heldBytes === 0, 'something was still held')
  t.pass('nothing held once they are answered')
})

/** A ModelInferRequest for sink whose one input has `count` typed int64 elements, each a one-byte
 * zero: 8 bytes each once decoded. */
const int64Zeros = (count: number) => Buffer.concat([delimited(1, 'sink'),
  delimited(5, Buffer.concat([delimited(1, 'IN'), delimited(2, 'INT64'), delimited(3, varintField(1, count).subarray(1)),
    delimited(5, delimited(3, Buffer.alloc(count)))]))])

/** A RepositoryModelLoadRequest of `count` empty parameters: two bytes each, two objects each once decoded. */
const emptyParameters = (count: number) => Buffer.concat([delimited(2, 'sink'), Buffer.alloc(2 * count).fill(Buffer.from([0x1a, 0]))])

t.test('a compressed message that inflates past the limit, or would cost too much decoded, is refused having held no more than its inflated size', async (t) => {
  const budget = 64 * MiB
  const { registry, listener } = await listening(t, [sink], budget, { repository: true })
  const { inFlight } = registry
  const raw = rawGrpc(t, listener.port as number)
  const limit = budget / 4
  for (const compression of ['gzip', 'deflate'] as const) {
    for (const method of ['ModelInfer', 'RepositoryIndex']) {
      const request = sent(Buffer.concat([encoded(method, {}), padding(limit)]), compression)
      t.ok(request.body.length < limit / 100, `${method}: ${request.body.length} bytes of ${compression}`)
      const answer = await raw.call(method, request.body, request.options)
      t.same([answer.status, answer.details], [status.RESOURCE_EXHAUSTED, `Received message that decompresses to a size larger than ${limit}`],
        `${method}: inflated no further than the limit`)
    }
  }
  t.equal(inFlight.peakBytes, 0, 'a message is charged once measured: one past the limit never was')

  const zeros = 4 * MiB
  const message = int64Zeros(zeros)
  const infer = sent(message, 'gzip')
  const costly = await raw.call('ModelInfer', infer.body, infer.options)
  t.equal(costly.status, status.INVALID_ARGUMENT)
  t.match(costly.details, new RegExp(`^the ModelInferRequest message of ${message.length} bytes would take \\d+ bytes once decoded, ` +
    `more than the ${allowedDecodedBytes(message.length, true)} the server allows for it`), 'compressed: allowed 3 times its size decoded, not 8')
  t.ok(inFlight.peakBytes <= zeros + 64, `its inflated bytes held, never its decoded form (${inFlight.peakBytes} bytes at most)`)
  const uncompressed = await raw.call('ModelInfer', framed(message))
  t.not(uncompressed.details, costly.details, `the same message uncompressed is allowed 8 times its size: ${uncompressed.details}`)

  const load = sent(emptyParameters(MiB), 'deflate')
  const refused = await raw.call('RepositoryModelLoad', load.body, load.options)
  t.equal(refused.status, status.INVALID_ARGUMENT)
  t.match(refused.details, /^the RepositoryModelLoadRequest message of 2097158 bytes would take \d+ bytes once decoded, more than the \d+ the server allows for it$/)
  await eventually(() => inFlight.heldBytes === 0, 'something was still held')
  t.pass('nothing held once they are answered')
})

t.test('every RPC\'s message is charged before it is decoded, and given back when its call is over', async (t) => {
  const budget = 16 * MiB
  const loading = new Gate(false)
  const loadable: ModelDeclaration = { ...sink, name: 'loadable', async load () { await loading.pass() } }
  const { registry, listener } = await listening(t, [sink, loadable], budget, { repository: { allowOverrides: true } })
  const { inFlight } = registry
  const raw = rawGrpc(t, listener.port as number)
  const config = JSON.stringify({ max_batch_size: 0 }) + ' '.repeat(MiB)
  const load = raw.call('RepositoryModelLoad', framed(encoded('RepositoryModelLoad', { model_name: 'loadable', parameters: { config: { string_param: config } } })))
  await loading.untilHeld(1)
  t.ok(inFlight.heldBytes > 3 * MiB, `a load's 1 MiB config, its string twice that, held while the load runs (${inFlight.heldBytes} bytes)`)
  loading.open()
  t.equal((await load).status, status.OK)
  await eventually(() => inFlight.heldBytes === 0, 'the load\'s message was still held')
  t.pass('given back when the call is over')

  const elsewhere = inFlight.open()
  elsewhere.charge(budget - 64 * KiB)
  for (const method of ['SystemSharedMemoryStatus', 'ModelStatistics', 'RepositoryIndex', 'ServerLive']) {
    const answer = await raw.call(method, framed(Buffer.concat([encoded(method, {}), padding(64 * KiB)])))
    t.equal(answer.status, status.RESOURCE_EXHAUSTED, `${method}: with the budget held elsewhere, refused before it is decoded`)
    t.match(answer.details, /^the server holds 16711680 bytes for requests in flight, of its limit of 16777216: this request needs \d+ more/)
  }
  const compressed = sent(Buffer.concat([encoded('SystemSharedMemoryStatus', {}), padding(64 * KiB)]), 'gzip')
  const busy = await raw.call('SystemSharedMemoryStatus', compressed.body, compressed.options)
  t.equal(busy.status, status.RESOURCE_EXHAUSTED, 'compressed: refused once measured, before it is inflated')
  const stream = rawStream(raw, 'ModelStreamInfer', 'gzip')
  stream.write(sent(encoded('ModelStreamInfer', sinkRequest(64 * KiB)), 'gzip').body)
  await stream.until(1)
  t.equal((await stream.end()).status, status.OK, 'on a stream, the refusal is that request\'s answer, and the stream goes on to its end')
  elsewhere.release()
  t.equal((await raw.call('SystemSharedMemoryStatus', framed(Buffer.concat([encoded('SystemSharedMemoryStatus', {}), padding(64 * KiB)])))).status,
    status.OK, 'and served once it is free')

  const malformed = await raw.call('SystemSharedMemoryRegister', framed(Buffer.from([0x0a, 0x05, 0x61])))
  t.same([malformed.status, malformed.details], [status.INVALID_ARGUMENT,
    'the SystemSharedMemoryRegisterRequest message is not valid protobuf: a field runs past the end of its message'], 'bytes that are no message, named')
  // Field 3 (offset, a number) sent delimited: a field the measure walks, that protobufjs cannot read.
  const misread = await raw.call('SystemSharedMemoryRegister', framed(Buffer.from([0x1a, 0x01, 0x80])))
  t.same([misread.status, misread.details], [status.INVALID_ARGUMENT,
    'the SystemSharedMemoryRegisterRequest message is not valid protobuf: index out of range: 3 + 1 > 3'], 'and bytes protobufjs cannot read')
  await eventually(() => inFlight.heldBytes === 0, 'something was still held')
  t.pass('nothing held once they are answered')
})

t.test('ModelInfer\'s message is charged once, as it arrives, with its request; an input copied to be aligned is charged first', async (t) => {
  const byteSize = 4 * MiB
  for (const [what, datatype, copies] of [['UINT8, read in place', 'UINT8', 1], ['FP32, copied', 'FP32', 2]] as const) {
    const model: ModelDeclaration = { ...sink, inputs: [{ name: 'IN', datatype, shape: [-1] }], run (infer) { infer.output<Int32Array>('OUT', [1])[0] = 1 } }
    // Charged twice, the message would not fit: it does once.
    const { registry, listener } = await listening(t, [model], copies * byteSize + MiB, {}, { maxMessageBytes: 2 * byteSize })
    const shape = [byteSize / (datatype === 'FP32' ? 4 : 1)]
    // The raw contents come last, at an offset no Float32Array starts at whether the server holds
    // the message alone or behind its frame's 5-byte prefix (an id of the length that does it).
    const messageWith = (id: string) => encoded('ModelInfer', { model_name: 'sink', id, inputs: [{ name: 'IN', datatype, shape }], raw_input_contents: [Buffer.alloc(byteSize)] })
    const message = ['', 'x', 'xx', 'xxx'].map(messageWith).find((bytes) => [1, 2].includes((bytes.length - byteSize) % 4)) as Buffer
    t.ok([1, 2].includes((message.length - byteSize) % 4) && (5 + message.length - byteSize) % 4 !== 0, `${what}: its bytes at an offset no Float32Array starts at`)
    const answer = await rawGrpc(t, listener.port as number).call('ModelInfer', framed(message))
    t.equal(answer.status, status.OK, `${what}: served (${answer.details ?? 'OK'})`)
    const peak = registry.inFlight.peakBytes
    t.ok(peak >= copies * byteSize && peak < copies * byteSize + MiB, `${what}: ${peak} bytes held at its peak`)
  }
})
