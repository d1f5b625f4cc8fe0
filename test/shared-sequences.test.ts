/**
 * A sequence belongs to the service, not to a process: with a shared registry, the process that
 * starts a sequence owns it (its state lives there), and a request of it that reaches another
 * process runs in the owner, whatever transport and connection brought it. Two Fastify apps of one
 * store stand for two processes (each has its own registry, store connection and socket); the
 * requests go over HTTP (inject) and gRPC (a real listener). Shared memory inputs and outputs are
 * used in place by the owner; other inputs travel whole, as do other outputs back. A request that
 * fails there is counted once; the owner's end ends its sequences with Triton's error.
 */
import Fastify, { type FastifyInstance } from 'fastify'
import t, { type Test } from 'tap'
import fastifyTritonShm, { type InferRequest, kserveModels, type ModelDeclaration, ModelTable, Registry, type TensorParameters } from '../lib/index'
import { grpcClient } from './helpers/grpc'
import { storePath } from './helpers/registry-peer'
import { makeObject, readObjectFile, writeObjectFile } from './helpers/shm'
import { bool, finalFlag, int32Bytes, int32s, sequenceParameters, shmParameters, streamClient } from './helpers/stream'
import { Gate } from './helpers/sync'

const FLAG = { datatype: 'INT32' as const }

/** Triton's accumulator: a START sets the sum, each request adds its input; the CORRID control
 * echoes the sequence's id. `gate` holds runs; `runs` records which process ran each. */
function accumulator (process: string, runs: string[], gate?: Gate): ModelDeclaration {
  return {
    name: 'acc',
    maxBatchSize: 8,
    inputs: [{ name: 'INPUT', datatype: 'INT32', shape: [-1, 1] }],
    outputs: [{ name: 'OUTPUT', datatype: 'INT32', shape: [-1, 1] }, { name: 'BYTES', datatype: 'BYTES', shape: [-1, 1] }],
    sequenceBatching: {
      maxSequenceIdleMicroseconds: 60_000_000,
      controlInputs: [{ name: 'START', kind: 'CONTROL_SEQUENCE_START', ...FLAG }, { name: 'ID', kind: 'CONTROL_SEQUENCE_CORRID', datatype: 'UINT64' }]
    },
    async run (infer: InferRequest) {
      runs.push(process)
      await gate?.pass()
      const sequence = infer.sequence as NonNullable<InferRequest['sequence']>
      const input = infer.input<Int32Array>('INPUT').data[0]
      if (input < 0) throw Object.assign(new Error(`the model refuses ${input}`), { statusCode: 422 })
      if (input === 999) throw new Error('an internal detail no client may see')
      sequence.state = infer.input<Int32Array>('START').data[0] === 1 ? input : (sequence.state as number) + input
      infer.output<Int32Array>('OUTPUT', [1, 1])[0] = sequence.state as number
      if (infer.requestedOutputs.includes('BYTES')) infer.output<Buffer[]>('BYTES', [1, 1])[0] = Buffer.from(`${process}:${String(infer.input<BigUint64Array>('ID').data[0])}`)
    }
  }
}

/** A decoupled, stateful model: as many responses as its input says, each the running count. */
function repeater (runs: string[], process: string): ModelDeclaration {
  return {
    name: 'repeat',
    decoupled: true,
    inputs: [{ name: 'IN', datatype: 'INT32', shape: [1] }],
    outputs: [{ name: 'OUT', datatype: 'INT32', shape: [1] }],
    sequenceBatching: {},
    async run (infer: InferRequest) {
      runs.push(process)
      const sequence = infer.sequence as NonNullable<InferRequest['sequence']>
      for (let index = 0; index < infer.input<Int32Array>('IN').data[0]; index++) {
        sequence.state = ((sequence.state as number | undefined) ?? 0) + 1
        infer.output<Int32Array>('OUT', [1])[0] = sequence.state as number
        await infer.send()
      }
    }
  }
}

interface Process { app: FastifyInstance, table: ModelTable, grpcPort: number }

async function serviceProcess (t: Test, store: string, name: string, runs: string[], gate?: Gate, logged: unknown[] = []): Promise<Process> {
  const log = { error: (object: object, message: string) => { logged.push({ ...object, message }) } }
  const table = new ModelTable([accumulator(name, runs, gate), repeater(runs, name)], { log })
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(fastifyTritonShm, { sharedRegistry: { path: store }, grpc: { port: 0, models: table } })
  await app.register(kserveModels, { models: table })
  await app.ready()
  return { app, table, grpcPort: app.tritonGrpc.port as number }
}

async function service (t: Test, gate?: Gate) {
  const store = storePath(t)
  const runs: string[] = []
  const a = await serviceProcess(t, store, 'a', runs, gate)
  const b = await serviceProcess(t, store, 'b', runs, gate)
  return { a, b, runs, store }
}

const sequence = (id: number | string, start = false, end = false): TensorParameters =>
  ({ sequence_id: id, ...(start && { sequence_start: true }), ...(end && { sequence_end: true }) })

async function httpInfer ({ app }: Process, value: number, parameters: TensorParameters, outputs = [{ name: 'OUTPUT' }]) {
  const response = await app.inject({
    method: 'POST',
    url: '/v2/models/acc/infer',
    payload: { parameters, inputs: [{ name: 'INPUT', datatype: 'INT32', shape: [1, 1], data: [value] }], outputs }
  })
  return response.statusCode === 200 ? response.json().outputs[0].data[0] as number : `${response.statusCode} ${response.json().error as string}`
}

const successes = ({ table }: Process) => table.statistics('acc').model_stats[0].inference_stats.success.count
const failures = ({ table }: Process) => table.statistics('acc').model_stats[0].inference_stats.fail.count

t.test('a sequence started in one process goes on in the other, over HTTP and gRPC: one state, runs where it lives', async (t) => {
  const { a, b, runs } = await service(t)
  const grpcOf = (process: Process) => grpcClient(t, process.grpcPort)
  const overGrpc = async (process: Process, value: number, id: number, start = false, end = false) => {
    const response = await grpcOf(process).call('ModelInfer', {
      model_name: 'acc',
      inputs: [{ name: 'INPUT', datatype: 'INT32', shape: [1, 1] }],
      outputs: [{ name: 'OUTPUT' }],
      raw_input_contents: [int32Bytes([value])],
      parameters: sequenceParameters(id, start, end)
    })
    return int32s(response.raw_output_contents[0])[0]
  }
  t.equal(await httpInfer(a, 10, sequence(7, true)), 10, 'started in a')
  t.equal(await httpInfer(b, 1, sequence(7)), 11, 'b\'s request added to a\'s state')
  t.equal(await overGrpc(b, 2, 7), 13, 'and over gRPC')
  t.equal(await overGrpc(a, 3, 7), 16)
  t.equal(await httpInfer(b, 4, sequence(7, false, true)), 20, 'ended from b')
  t.same(runs, ['a', 'a', 'a', 'a', 'a'], 'every request ran in a, where the sequence lives')
  t.equal(await httpInfer(b, 1, sequence(7)), "400 inference request for sequence 7 to model 'acc' must specify the START flag on the first request of the sequence",
    'an ended sequence is gone in every process')
  t.equal(await httpInfer(a, 1, sequence(7)), "400 inference request for sequence 7 to model 'acc' must specify the START flag on the first request of the sequence")

  runs.length = 0
  t.equal(await overGrpc(b, 5, 8, true), 5, 'a sequence b starts is b\'s')
  t.equal(await httpInfer(a, 5, sequence(8)), 10)
  t.equal(await httpInfer(a, 100, sequence(8, true)), 100, 'a START of it from a starts it again in b')
  t.equal(await httpInfer(a, 1, sequence(8)), 101)
  t.same(runs, ['b', 'b', 'b', 'b'])
  const [statsA, statsB] = [a, b].map((process) => process.table.statistics('acc').model_stats[0])
  t.same(statsA, statsB, 'both answer the statistics of the whole service')
  t.equal(statsA.inference_stats.success.count, 9, 'each request counted once, where it ran')
  t.equal(statsA.inference_stats.fail.count, 2)
  t.equal(statsA.execution_count, 9)
})

t.test('inputs and outputs in shared memory are used in place by the owner; other outputs travel back whole', async (t) => {
  const { a, b } = await service(t)
  const key = makeObject(t, 64, 'forwarded')
  for (const process of [a, b]) {
    const response = await process.app.inject({ method: 'POST', url: `/v2/systemsharedmemory/region/r${process === a ? 'a' : 'b'}/register`, payload: { key, byte_size: 64 } })
    t.equal(response.statusCode, 200)
  }
  t.equal(await httpInfer(a, 40, sequence('s1', true)), '400 [request id: <id_unknown>] sequence batching control \'ID\' data-type is \'BYTES\', but model \'acc\' expects \'UINT64\'',
    'the owner\'s checks are Triton\'s, as ever')
  t.equal(await httpInfer(a, 40, sequence(21, true)), 40)
  writeObjectFile(key, 0, int32Bytes([2]))
  const response = await b.app.inject({
    method: 'POST',
    url: '/v2/models/acc/infer',
    payload: {
      id: 'in-shm',
      parameters: sequence(21),
      inputs: [{ name: 'INPUT', datatype: 'INT32', shape: [1, 1], parameters: { shared_memory_region: 'rb', shared_memory_byte_size: 4 } }],
      outputs: [{ name: 'OUTPUT', parameters: { shared_memory_region: 'rb', shared_memory_offset: 8, shared_memory_byte_size: 4 } }, { name: 'BYTES', parameters: { binary_data: true } }]
    }
  })
  t.equal(response.statusCode, 200, response.body.slice(0, 300))
  const headerLength = Number(response.headers['inference-header-content-length'])
  const header = JSON.parse(response.rawPayload.subarray(0, headerLength).toString())
  t.same(header, {
    id: 'in-shm',
    model_name: 'acc',
    model_version: '1',
    outputs: [{ name: 'OUTPUT', datatype: 'INT32', shape: [1, 1] }, { name: 'BYTES', datatype: 'BYTES', shape: [1, 1], parameters: { binary_data_size: 8 } }]
  })
  t.same(readObjectFile(key, 8, 4), [...int32Bytes([42])], 'the owner wrote the sum where the request asked')
  t.equal(response.rawPayload.subarray(headerLength + 4).toString(), 'a:21', 'the binary output came back from a')
  // The same over gRPC: every output not in shared memory comes back raw.
  const overGrpc = await grpcClient(t, b.grpcPort).call('ModelInfer', {
    model_name: 'acc',
    inputs: [{ name: 'INPUT', datatype: 'INT32', shape: [1, 1], parameters: shmParameters('rb', 4) }],
    parameters: sequenceParameters(21)
  })
  t.same(int32s(overGrpc.raw_output_contents[0]), [44])
  t.equal(Buffer.from(overGrpc.raw_output_contents[1]).subarray(4).toString(), 'a:21')
  // The owner's refusal, in Triton's words: an output region too small for its result.
  const tooSmall = await b.app.inject({
    method: 'POST',
    url: '/v2/models/acc/infer',
    payload: {
      parameters: sequence(21),
      inputs: [{ name: 'INPUT', datatype: 'INT32', shape: [1, 1], data: [1] }],
      outputs: [{ name: 'OUTPUT', parameters: { shared_memory_region: 'rb', shared_memory_offset: 8, shared_memory_byte_size: 2 } }]
    }
  })
  t.same([tooSmall.statusCode, tooSmall.json().error], [400,
    "shared memory size specified with the request for output 'OUTPUT' (2 bytes) should be at least 4 bytes to hold the results"])
})

t.test('a decoupled model\'s responses come back one by one over a stream of the other process, each final flag as Triton\'s', async (t) => {
  const { a, b, runs } = await service(t)
  const write = (stream: ReturnType<typeof streamClient>, count: number, id: string, start = false) => stream.write({
    model_name: 'repeat',
    id,
    inputs: [{ name: 'IN', datatype: 'INT32', shape: [1] }],
    raw_input_contents: [int32Bytes([count])],
    parameters: { ...sequenceParameters('five', start), triton_enable_empty_final_response: bool(true) }
  })
  const onA = streamClient(t, a.grpcPort)
  write(onA, 2, 'first', true)
  const first = await onA.until(3)
  t.same(first.map((response) => [int32s(response.infer_response.raw_output_contents?.[0] ?? Buffer.alloc(0)), finalFlag(response)]), [[[1], false], [[2], false], [[], true]])
  const onB = streamClient(t, b.grpcPort)
  write(onB, 3, 'second')
  const second = await onB.until(4)
  t.same(second.map((response) => response.infer_response.id), ['second', 'second', 'second', 'second'])
  t.same(second.map((response) => [int32s(response.infer_response.raw_output_contents?.[0] ?? Buffer.alloc(0)), finalFlag(response)]),
    [[[3], false], [[4], false], [[5], false], [[], true]], 'the count went on in a')
  t.same(runs, ['a', 'a'])
  t.equal((await onB.end()).code, 0)
})

t.test('a failure in the owner reaches the client as the owner answered it, counted once', async (t) => {
  const { a, b } = await service(t)
  t.equal(await httpInfer(a, 1, sequence(3, true)), 1)
  t.equal(await httpInfer(b, -5, sequence(3)), '422 the model refuses -5', 'the host\'s own HTTP error, relayed')
  const failed = await grpcClient(t, b.grpcPort).fail('ModelInfer', {
    model_name: 'acc',
    inputs: [{ name: 'INPUT', datatype: 'INT32', shape: [1, 1] }],
    raw_input_contents: [int32Bytes([-6])],
    parameters: sequenceParameters(3)
  })
  t.same([failed.code, failed.details], [3, 'the model refuses -6'], 'over gRPC as over HTTP')
  t.equal(await httpInfer(b, 2, sequence(3)), 3, 'the sequence goes on')
  t.same([successes(a), failures(a)], [2, 2], 'each failure counted once, by the owner that ran it')
})

t.test('an error of the owner that is no client\'s to see is logged there, and answered as a bare 500', async (t) => {
  const store = storePath(t)
  const runs: string[] = []
  const logged: Array<{ message: string, err?: Error }> = []
  const a = await serviceProcess(t, store, 'a', runs, undefined, logged)
  const b = await serviceProcess(t, store, 'b', runs)
  t.equal(await httpInfer(a, 1, sequence(6, true)), 1)
  t.equal(await httpInfer(b, 999, sequence(6)), '500 Internal Server Error')
  t.same(logged.map(({ message, err }) => [message, err?.message]),
    [['a request handed over by another process of the service failed', 'an internal detail no client may see']])
})

t.test('a sequence said to be owned by a process whose tables do not serve its model is gone, never a hang', async (t) => {
  const { b, store } = await service(t)
  // A process of the service that serves another table only.
  const registry = new Registry({ sharedRegistry: { path: store } })
  t.teardown(() => registry.close())
  new ModelTable([{ name: 'other', inputs: [], outputs: [], run () {} }]).serveWith(registry)
  const peers = registry.modelStore().peers as NonNullable<ReturnType<Registry['modelStore']>['peers']>
  t.equal(peers.claimSequence({ model: 'acc', version: '1', id: 'n77' }), peers.self)
  t.equal(await httpInfer(b, 1, sequence(77)), "400 inference request for sequence 77 to model 'acc' must specify the START flag on the first request of the sequence")
})

t.test('a sequence that ends after its store closed (the server is stopping) still ends', async (t) => {
  const { a } = await service(t)
  t.equal(await httpInfer(a, 1, sequence(12, true)), 1)
  a.app.systemSharedMemory.close()
  t.equal(await httpInfer(a, 2, sequence(12, false, true)), 3, 'its record could not be dropped: the store is closed, and the process leaves it')
})

t.test('a request forwarded then abandoned by its client is abandoned in the owner, where it waited its turn', async (t) => {
  const gate = new Gate()
  const { a, b, runs } = await service(t, gate)
  t.equal(await httpInfer(a, 1, sequence(4, true)), 1)
  gate.close()
  const first = httpInfer(a, 1, sequence(4))
  await gate.untilHeld(1)
  const call = grpcClient(t, b.grpcPort).start('ModelInfer', {
    model_name: 'acc',
    inputs: [{ name: 'INPUT', datatype: 'INT32', shape: [1, 1] }],
    raw_input_contents: [int32Bytes([100])],
    parameters: sequenceParameters(4)
  })
  // Forwarded to a, where it waits for the request before it.
  await new Promise<void>((resolve) => {
    const check = () => (a.table.metricVersions()[0].totals().pending === 1 ? resolve() : setImmediate(check))
    check()
  })
  call.cancel()
  await t.rejects(call.outcome, { code: 1 })
  // Counted by a once it saw the client go: only the owner counts a forwarded request.
  await new Promise<void>((resolve) => {
    const check = () => (a.table.metricVersions()[0].totals().failures.CANCELED === 1 ? resolve() : setImmediate(check))
    check()
  })
  gate.open()
  t.equal(await first, 2)
  t.equal(await httpInfer(b, 1, sequence(4)), 3, 'the abandoned request never ran')
  t.same(runs, ['a', 'a', 'a'])
  t.same([successes(a), failures(a)], [3, 1], 'counted once, as cancelled, by the owner')
})

t.test('an owner that ends ends its sequences: requests in flight there and later ones get Triton\'s error, never a hang', async (t) => {
  const gate = new Gate()
  const { a, b } = await service(t, gate)
  t.equal(await httpInfer(a, 1, sequence(9, true)), 1)
  t.equal(await httpInfer(a, 1, sequence(10, true)), 1)
  gate.close()
  const inFlight = httpInfer(b, 1, sequence(9))
  await gate.untilHeld(1)
  const closing = a.app.close()
  gate.open()
  await closing
  const notStarted = (id: number) => `400 inference request for sequence ${id} to model 'acc' must specify the START flag on the first request of the sequence`
  t.match(await inFlight, /^(2|400 inference request for sequence 9 .*)$/, 'the request in flight was answered')
  t.equal(await httpInfer(b, 1, sequence(10)), notStarted(10), 'a later request: the sequence is gone')
  t.equal(await httpInfer(b, 7, sequence(10, true)), 7, 'started again, here')
})

t.test('an owner that dies with a request in flight: the request gets Triton\'s error at once', async (t) => {
  const gate = new Gate()
  const store = storePath(t)
  const runs: string[] = []
  const b = await serviceProcess(t, store, 'b', runs)
  // The owner's socket, and a listener that takes the call and dies without answering it.
  const a = await serviceProcess(t, store, 'a', runs, gate)
  t.equal(await httpInfer(a, 1, sequence(11, true)), 1)
  gate.close()
  const inFlight = httpInfer(b, 1, sequence(11))
  await gate.untilHeld(1)
  // Its connections cut as a death cuts them: the socket closes under the call.
  a.app.systemSharedMemory.close()
  t.equal(await inFlight, "400 inference request for sequence 11 to model 'acc' must specify the START flag on the first request of the sequence")
  gate.open()
})
