/**
 * The model table on its own, with no transport: declarations checked up front, name -> version
 * resolution with Triton's texts and statuses, readiness, the metadata and configuration it
 * derives, and the statistics it measures around real infer requests.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import t from 'tap'
import { InferRequest, type ModelDeclaration, ModelTable, Registry, TritonError } from '../lib/index'
import type { InferRequestWire, ModelSignature } from '../types'

type Numbers = Int32Array

/** OUTPUT0 = INPUT0 + INPUT1 over INT32 tensors of `shape`. */
function adder (overrides: Partial<ModelDeclaration> = {}): ModelDeclaration {
  const shape = overrides.maxBatchSize === undefined ? [4] : [-1, 4]
  return {
    name: 'add',
    inputs: [{ name: 'INPUT0', datatype: 'INT32', shape }, { name: 'INPUT1', datatype: 'INT32', shape }],
    outputs: [{ name: 'OUTPUT0', datatype: 'INT32', shape }],
    run (infer) {
      const { data: a, shape } = infer.input<Numbers>('INPUT0')
      const b = infer.input<Numbers>('INPUT1').data
      const sum = infer.output<Numbers>('OUTPUT0', shape)
      a.forEach((value, index) => { sum[index] = value + b[index] })
    },
    ...overrides
  }
}

const wire = (shape: number[], values = [1, 2, 3, 4]): InferRequestWire => ({
  inputs: ['INPUT0', 'INPUT1'].map((name) => ({ name, datatype: 'INT32', shape, data: values.concat(...Array(shape.length === 2 ? shape[0] - 1 : 0).fill(values)) }))
})

function errorOf (fn: () => unknown): TritonError {
  try {
    fn()
  } catch (error) {
    return error as TritonError
  }
  throw new Error('did not throw')
}

const failure = (error: TritonError) => ({ kind: error.kind, code: error.code, message: error.message })

t.test('resolution: name -> version, the newest ready one by default, with Triton\'s errors', async (t) => {
  const table = new ModelTable([
    adder({ versions: ['1', '10'] }),
    adder({ versions: ['2'], platform: 'second' }),
    adder({ name: 'other' })
  ])
  t.same(table.names, ['add', 'other'])
  t.same(table.signature('add').versions, ['1', '10'], 'the newest is 10, not 2: versions are numbers')
  t.equal(table.signature('add', '2').platform, 'second')
  t.equal(table.signature('add', '002').platform, 'second', 'a version is read as a number')
  t.same(table.signature('other').versions, ['1'], 'a model declared without versions has version 1')

  t.same(failure(errorOf(() => table.metadata('nope'))),
    { kind: 'not-found', code: 'ERR_SHM_UNKNOWN_MODEL', message: "Request for unknown model: 'nope' is not found" })
  t.same(failure(errorOf(() => table.config('add', '3'))),
    { kind: 'not-found', code: 'ERR_SHM_UNKNOWN_MODEL_VERSION', message: "Request for unknown model: 'add' version 3 is not found" })
  t.same(failure(errorOf(() => table.statistics('add', 'x1'))),
    { kind: 'invalid', code: 'ERR_SHM_INVALID_MODEL_VERSION', message: "Invalid model version: 'x1' is not a number" })
  t.same(failure(errorOf(() => table.isModelReady('add', '-1'))),
    { kind: 'invalid', code: 'ERR_SHM_INVALID_MODEL_VERSION', message: "Invalid model version: '-1' is not a number" })
})

t.test('readiness: per version; the default skips versions that are not ready', async (t) => {
  const table = new ModelTable([adder({ versions: ['1', '2'] }), adder({ name: 'later', ready: false })])
  t.equal(table.isReady(), false, 'the server is not ready while a model has no ready version')
  t.equal(table.isModelReady('later'), false)
  t.same(failure(errorOf(() => table.metadata('later'))),
    { kind: 'not-found', code: 'ERR_SHM_NO_AVAILABLE_VERSION', message: "Request for unknown model: 'later' has no available versions" })
  t.same(failure(errorOf(() => table.statistics('later'))).code, 'ERR_SHM_NO_AVAILABLE_VERSION')
  t.same(failure(errorOf(() => table.config('later', '1'))),
    { kind: 'unavailable', code: 'ERR_SHM_MODEL_NOT_READY', message: "Request for unknown model: 'later' version 1 is not at ready state" })
  t.same(table.statistics().model_stats.map(({ name, version }) => `${name}/${version}`), ['add/1', 'add/2'], 'only ready versions are listed')
  t.same(failure(errorOf(() => table.isModelReady('nope'))).kind, 'not-found')

  table.setReady('later', '1', true)
  t.equal(table.isReady(), true)
  table.setReady('add', '2', false)
  t.equal(table.isModelReady('add'), true, 'version 1 is still ready')
  t.equal(table.isModelReady('add', '2'), false)
  t.same(table.metadata('add').versions, ['1'], 'metadata lists the ready versions')
  t.same(table.config('add').version_policy, { specific: { versions: [1, 2] } }, 'the configuration every declared one')
  t.same(failure(errorOf(() => table.setReady('add', '3', true))).kind, 'not-found')
})

t.test('metadata and configuration, as Triton prints them', async (t) => {
  const batching: ModelDeclaration = {
    name: 'labels',
    platform: 'onnxruntime_onnx',
    backend: 'onnxruntime',
    maxBatchSize: 8,
    inputs: [{ name: 'TEXT', datatype: 'BYTES', shape: [-1, 2] }],
    outputs: [{ name: 'SCORES', datatype: 'FP32', shape: [-1, 3] }, { name: 'IDS', datatype: 'INT64', shape: [-1] }],
    labelFilenames: { SCORES: 'labels.txt' },
    run () {}
  }
  const table = new ModelTable([batching, { ...adder(), name: 'any', maxBatchSize: Infinity, inputs: [], outputs: [{ name: 'O', datatype: 'FP16', shape: [-1] }] }])
  t.same(table.metadata('labels'), {
    name: 'labels',
    versions: ['1'],
    platform: 'onnxruntime_onnx',
    inputs: [{ name: 'TEXT', datatype: 'BYTES', shape: [-1, 2] }],
    outputs: [{ name: 'SCORES', datatype: 'FP32', shape: [-1, 3] }, { name: 'IDS', datatype: 'INT64', shape: [-1] }]
  })
  t.same(table.config('labels', '1'), {
    name: 'labels',
    platform: 'onnxruntime_onnx',
    backend: 'onnxruntime',
    runtime: '',
    version_policy: { specific: { versions: [1] } },
    max_batch_size: 8,
    input: [{
      name: 'TEXT',
      data_type: 'TYPE_STRING',
      format: 'FORMAT_NONE',
      dims: [2],
      is_shape_tensor: false,
      allow_ragged_batch: false,
      optional: false,
      is_non_linear_format_io: false
    }],
    output: [
      { name: 'SCORES', data_type: 'TYPE_FP32', dims: [3], label_filename: 'labels.txt', is_shape_tensor: false, is_non_linear_format_io: false },
      { name: 'IDS', data_type: 'TYPE_INT64', dims: [], label_filename: '', is_shape_tensor: false, is_non_linear_format_io: false }
    ],
    batch_input: [],
    batch_output: [],
    instance_group: [{ name: 'labels', kind: 'KIND_CPU', count: 1, gpus: [], secondary_devices: [], profile: [], passive: false, host_policy: '' }],
    default_model_filename: '',
    cc_model_filenames: {},
    metric_tags: {},
    parameters: {},
    model_warmup: [],
    model_transaction_policy: { decoupled: false },
    response_cache: { enable: false }
  })
  const any = table.config('any')
  t.equal(any.max_batch_size, 2147483647, 'any batch is Triton\'s largest int32')
  t.same([any.platform, any.backend, any.output[0].data_type, any.output[0].dims], ['', '', 'TYPE_FP16', []])
  t.equal(table.metadata('any').platform, '')
  t.same(new ModelTable([adder()]).config('add').input[0].dims, [4], 'a model without batching shows its whole shape')
})

t.test('declarations are checked when the table is made', async (t) => {
  const refused = (declaration: unknown, message: string | RegExp) =>
    t.throws(() => new ModelTable([declaration as ModelDeclaration]), { name: 'TypeError', message }, String(message))
  refused({ ...adder(), run: undefined }, "fastify-triton-shm: model 'add': the declaration must have property 'run' (or 'ensembleScheduling')")
  refused({ ...adder(), run: 'yes' }, "fastify-triton-shm: model 'add': 'run' must be a function")
  refused({ ...adder(), name: 7 }, "fastify-triton-shm: model: 'name' must be string")
  refused(null, 'fastify-triton-shm: model: the declaration must be object')
  refused({ ...adder(), versions: ['1.5'] }, /model 'add': 'versions.0' must match pattern/)
  refused({ ...adder(), versions: [] }, /'versions' must NOT have fewer than 1 items/)
  refused({ ...adder(), versions: ['1', '1'] }, /'versions' must NOT have duplicate items/)
  refused({ ...adder(), maxBatchSize: -1 }, "fastify-triton-shm: model 'add': 'maxBatchSize' must be a non-negative integer or Infinity")
  refused({ ...adder(), maxBatchSize: 4 }, "fastify-triton-shm: model 'add': tensor 'INPUT0' must have -1 as its first dimension: " +
    'with maxBatchSize above 0 it is the batch')
  refused({ ...adder(), inputs: [{ name: 'X', datatype: 'FLOAT', shape: [1] }] }, /'inputs.0.datatype' must be equal to one of the allowed values/)
  refused({ ...adder(), colour: 'blue' }, "fastify-triton-shm: model 'add': unknown field 'colour'")
  refused({ ...adder(), inputs: [{ name: 'X', datatype: 'INT8', shape: [1], extra: 1 }] }, "fastify-triton-shm: model 'add': unknown field 'inputs.0.extra'")
  t.throws(() => new ModelTable([adder({ versions: ['1', '2'] }), adder({ versions: ['3', '2'] })]),
    { name: 'TypeError', message: "fastify-triton-shm: model 'add' version 2 is declared twice" })
  t.throws(() => new ModelTable([adder({ maxBatchSize: 4, outputs: [{ name: 'O', datatype: 'INT32', shape: [] }] })]),
    { message: /tensor 'O' must have -1/ }, 'a scalar cannot carry the batch')
})

t.test('infer: each phase timed; successes, failures and batches counted', async (t) => {
  const registry = new Registry()
  t.teardown(() => registry.close())
  let runs = 0
  const sums = new WeakMap<InferRequest, number[]>()
  const model = adder({ maxBatchSize: 8, versions: ['1', '2'] })
  const table = new ModelTable([{
    ...model,
    async run (infer) {
      runs++
      if (infer.id === 'throw') throw new TritonError('ERR_TEST', 'invalid', 'the model refused')
      await sleep(5)
      await model.run?.(infer)
      sums.set(infer, Array.from(infer.input<Numbers>('INPUT0').data, (value, index) => value + infer.input<Numbers>('INPUT1').data[index]))
    }
  }])
  const read = (body: InferRequestWire) => (signature: ModelSignature) => new InferRequest(body, Buffer.alloc(0), { registry, model: signature })
  const respond = () => undefined

  const never = table.statistics('add', '2').model_stats[0]
  const zero = { count: 0, ns: 0 }
  t.same(never, {
    name: 'add',
    version: '2',
    last_inference: 0,
    inference_count: 0,
    execution_count: 0,
    inference_stats: {
      success: zero, fail: zero, queue: zero, compute_input: zero, compute_infer: zero, compute_output: zero, cache_hit: zero, cache_miss: zero
    },
    response_stats: {},
    batch_stats: [],
    memory_usage: []
  }, 'a version never run: every count 0')

  const before = Date.now()
  const answer = await table.infer('add', undefined, {
    read: read(wire([2, 4])),
    beforeRun: () => sleep(20),
    respond: (infer) => sums.get(infer)
  })
  t.same(answer, [2, 4, 6, 8, 2, 4, 6, 8], 'the response is built after the run')
  const built = new InferRequest(wire([1, 4]), Buffer.alloc(0), { registry, model: table.signature('add', '1') })
  await table.infer('add', '1', { read: () => built, respond: () => 'done' })
  await table.infer('add', '2', { read: read(wire([1, 4])), respond: () => undefined })

  t.match(await table.infer('add', '2', { read: read({ inputs: [] }), respond }).catch((error: Error) => error),
    { kind: 'invalid', code: 'ERR_SHM_INPUT_COUNT_MISMATCH' }, 'a request that cannot be read fails')
  await t.rejects(table.infer('add', '2', { read: read({ ...wire([1, 4]), id: 'throw' }), respond }), { message: 'the model refused' })
  const abandoned = new InferRequest(wire([1, 4]), Buffer.alloc(0), { registry, model: table.signature('add') })
  abandoned.abandon()
  const runsBefore = runs
  t.match(await table.infer('add', '2', { read: () => abandoned, respond }).catch((error: Error) => error), { kind: 'cancelled' })
  t.equal(runs, runsBefore, 'a request whose client left is not run')
  t.match(await table.infer('nope', undefined, { read: read(wire([1, 4])), respond }).catch((error: Error) => error), { kind: 'not-found' },
    'an unknown model counts nowhere')

  const [first, second] = table.statistics('add').model_stats
  t.same([first.version, second.version], ['1', '2'])
  t.equal(first.inference_stats.success.count, 1)
  t.equal(first.inference_stats.fail.count, 0)
  const stats = second.inference_stats
  t.same([stats.success.count, stats.fail.count, stats.queue.count], [2, 3, 2], 'queue counts every successful request')
  t.same([stats.compute_input.count, stats.compute_infer.count, stats.compute_output.count], [2, 2, 2])
  t.equal(second.execution_count, 2)
  t.equal(second.inference_count, 3, 'batch elements: 2 + 1')
  t.ok(stats.queue.ns >= 19e6, `the wait before the run is queue time (${stats.queue.ns} ns)`)
  t.ok(stats.compute_infer.ns >= 9e6, `the runs are compute_infer (${stats.compute_infer.ns} ns)`)
  t.ok(stats.success.ns >= stats.queue.ns + stats.compute_input.ns + stats.compute_infer.ns + stats.compute_output.ns,
    'a request\'s whole time holds its phases')
  t.ok(stats.fail.ns > 0)
  t.ok(second.last_inference >= before && second.last_inference <= Date.now())
  t.same(second.batch_stats.map(({ batch_size: size, compute_infer: infer }) => [size, infer.count]), [[1, 1], [2, 1]])
  t.same(table.statistics('add', '1').model_stats, [first])
  t.same(table.statistics().model_stats, [first, second])

  const generators = new ModelTable([{ name: 'gen', maxBatchSize: 4, inputs: [], outputs: [], run () {} }, { name: 'one', inputs: [], outputs: [], run () {} }])
  await generators.infer('gen', undefined, { read: read({ inputs: [] }), respond })
  await generators.infer('one', undefined, { read: read({ inputs: [] }), respond })
  t.same(generators.statistics().model_stats.map(({ inference_count: count }) => count), [1, 1],
    'a batching model with no input infers a batch of one; a model without batching, one per request')
})
