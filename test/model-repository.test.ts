/**
 * The model repository extension on the model table, with no transport: the index and its states,
 * load and unload with their hooks (in order, an unload's after the requests in flight), Triton's
 * errors, the overrides a table takes only when allowed, readiness, and the table's options.
 */
import t, { type Test } from 'tap'
import { InferRequest, type ModelDeclaration, ModelTable, Registry } from '../lib/index'
import type { InferRequestWire, ModelLoadOverrides, ModelSignature } from '../types'
import { storePath } from './helpers/registry-peer'
import { bounded } from './helpers/sync'

const tensor = (name: string) => ({ name, datatype: 'INT32' as const, shape: [2] })

function model (name: string, overrides: Partial<ModelDeclaration> = {}): ModelDeclaration {
  return {
    name,
    inputs: [tensor('INPUT0')],
    outputs: [tensor('OUTPUT0')],
    run (infer) { infer.output<Int32Array>('OUTPUT0', [2]).set(infer.input<Int32Array>('INPUT0').data) },
    ...overrides
  }
}

const wire: InferRequestWire = { inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [2], data: [1, 2] }] }

function inferrer (t: Test) {
  const registry = new Registry()
  t.teardown(() => registry.close())
  const read = (signature: ModelSignature) => new InferRequest(wire, Buffer.alloc(0), { registry, model: signature })
  return (table: ModelTable, name: string, version?: string) =>
    table.infer(name, version, { read, respond: () => 'ok' }).catch((error: Error) => error.message)
}

/** A promise and its resolution, to hold a hook or a run until the test lets it go. */
function deferred () {
  let resolve!: () => void
  const promise = new Promise<void>((_resolve) => { resolve = _resolve })
  return { promise, resolve }
}

const states = (table: ModelTable, ready?: boolean) => table.index(ready).map(({ name, version, state, reason }) =>
  `${name}/${version} ${state}${reason === undefined ? '' : ` (${reason})`}`)

t.test('the index: every declared version by name, with its state; ready ones only if asked', async (t) => {
  const table = new ModelTable([model('b', { versions: ['2', '10'] }), model('a'), model('c', { ready: false })], { repository: true })
  t.equal(table.servesRepository, true)
  t.same(states(table), ['a/1 READY', 'b/2 READY', 'b/10 READY', 'c/1 UNAVAILABLE (not ready)'])
  t.same(states(table, true), ['a/1 READY', 'b/2 READY', 'b/10 READY'])
  t.equal(new ModelTable([]).servesRepository, false, 'served only when asked for')
})

t.test('unload and load: requests refused between, hooks run in order, Triton\'s errors', async (t) => {
  const calls: string[] = []
  const hooked = model('hooked', {
    versions: ['1', '2'],
    load: (version, { config, files }) => { calls.push(`load ${version} ${config ?? '-'} ${Object.keys(files).join(',') || '-'}`) },
    unload: async (version) => { calls.push(`unload ${version}`) }
  })
  const table = new ModelTable([hooked, model('plain')], { repository: { allowOverrides: true } })
  const infer = inferrer(t)

  table.unload('hooked')
  t.same(states(table), ['hooked/1 UNAVAILABLE (unloaded)', 'hooked/2 UNAVAILABLE (unloaded)', 'plain/1 READY'])
  t.equal(await infer(table, 'hooked'), "Request for unknown model: 'hooked' has no available versions")
  t.equal(await infer(table, 'hooked', '2'), "Request for unknown model: 'hooked' version 2 is not at ready state")
  t.equal(table.isModelReady('hooked'), false)
  t.equal(table.isModelReady('hooked', '1'), false)
  t.equal(table.isReady(), true, 'a model unloaded on request keeps no server from being ready, as in Triton')
  t.throws(() => table.metadata('hooked'), { code: 'ERR_SHM_NO_AVAILABLE_VERSION' })
  t.throws(() => table.statistics('hooked'), { code: 'ERR_SHM_NO_AVAILABLE_VERSION' })
  t.same(table.statistics().model_stats.map(({ name }) => name), ['plain'])
  t.same(table.metricVersions().map(({ name }) => name), ['plain'], 'metrics report loaded versions only')
  await Promise.resolve()
  t.same(calls, ['unload 1', 'unload 2'])
  table.unload('hooked')
  table.unload('nope')
  await Promise.resolve()
  t.same(calls, ['unload 1', 'unload 2'], 'unloading an unloaded or unknown model does nothing (and succeeds, as in Triton)')

  await table.load('hooked')
  t.same(calls.slice(2), ['load 1 - -', 'load 2 - -'])
  t.equal(await infer(table, 'hooked'), 'ok')
  await table.load('hooked', { config: '{}', files: { 'file:1/model.onnx': Buffer.from('x') } })
  t.same(calls.slice(4), ['load 1 {} file:1/model.onnx', 'load 2 {} file:1/model.onnx'], 'a reload runs the hooks again, with its overrides')
  t.same(states(table).slice(0, 2), ['hooked/1 READY', 'hooked/2 READY'])

  await t.rejects(table.load('nope'), { kind: 'internal', code: 'ERR_SHM_LOAD_UNKNOWN_MODEL', message: "failed to load 'nope', failed to poll from model repository" })
  await t.rejects(table.load('plain', { config: '{}', files: {} }), {
    kind: 'denied', code: 'ERR_SHM_LOAD_OVERRIDES_REFUSED', message: "failed to load 'plain': model 'plain' has no load hook to take a configuration or files"
  })
  await table.load('plain')
  table.unload('plain')
  t.equal(await infer(table, 'plain'), "Request for unknown model: 'plain' has no available versions", 'a model without hooks unloads at once')
  await table.load('plain')
  t.equal(await infer(table, 'plain'), 'ok', 'and loads at once')
})

t.test('overrides are refused unless the table allows them', async (t) => {
  const table = new ModelTable([model('m', { load () {} })], { repository: true })
  const refused = { kind: 'denied', code: 'ERR_SHM_LOAD_OVERRIDES_REFUSED', message: /^failed to load 'm': this server takes no model configuration or files/ }
  await t.rejects(table.load('m', { config: '{}', files: {} }), refused)
  await t.rejects(table.load('m', { files: { 'file:1/model.onnx': new Uint8Array(1) } }), refused)
  // Triton writes the files before it polls them: a name no file system holds fails that poll first.
  const unwritable = { kind: 'internal', code: 'ERR_SHM_LOAD_FILE_UNWRITABLE', message: "failed to load 'm', failed to poll from model repository" }
  await t.rejects(table.load('m', { config: '{}', files: { [`file:${'A'.repeat(256)}`]: new Uint8Array(1) } }), unwritable)
  await t.rejects(table.load('m', { files: { [`file:1/${'é'.repeat(128)}`]: new Uint8Array(1) } }), unwritable, '256 bytes in 128 characters')
  await t.rejects(table.load('m', { files: { [`file:1/${'A'.repeat(255)}`]: new Uint8Array(1) } }), refused, '255 bytes is a name')
  await table.load('m', { files: {} })
  t.same(states(table), ['m/1 READY'], 'a load without them is fine')
})

t.test('a load whose hook fails leaves the model unavailable, with its reason; the server not ready', async (t) => {
  let fail: unknown = new Error('no such file')
  const calls: string[] = []
  const table = new ModelTable([model('m', {
    versions: ['1', '2', '3'],
    load: (version) => {
      calls.push(`load ${version}`)
      if (version === '2' && fail !== undefined) throw fail
    },
    unload: (version) => { calls.push(`unload ${version}`) }
  })])
  await t.rejects(table.load('m'), { kind: 'invalid', code: 'ERR_SHM_LOAD_FAILED', message: "load failed for model 'm': version 2 is at UNAVAILABLE state: no such file;" })
  t.same(states(table), ['m/1 UNAVAILABLE (no such file)', 'm/2 UNAVAILABLE (no such file)', 'm/3 UNAVAILABLE (no such file)'])
  t.equal(table.isReady(), false, 'a failed load is no unload: the server is not ready')
  await new Promise((resolve) => setImmediate(resolve))
  t.same(calls, ['load 1', 'load 2', 'load 3', 'unload 1', 'unload 2', 'unload 3'], 'every version is loaded, then all are unloaded')
  fail = 'not an Error'
  await t.rejects(table.load('m'), { message: "load failed for model 'm': version 2 is at UNAVAILABLE state: not an Error;" })
  fail = undefined
  await table.load('m')
  t.same(states(table), ['m/1 READY', 'm/2 READY', 'm/3 READY'])
  t.equal(table.isReady(), true)
})

t.test('requests wait for a load in progress; an unload\'s hook waits for the requests in flight', async (t) => {
  const loading = deferred()
  const running = deferred()
  const goOn = deferred()
  const calls: string[] = []
  const table = new ModelTable([model('m', {
    async run (infer) {
      running.resolve()
      await goOn.promise
      infer.output<Int32Array>('OUTPUT0', [2]).set([7, 7])
    },
    load: async () => {
      calls.push('load starts')
      await loading.promise
      calls.push('load ends')
    },
    unload: () => { calls.push('unload') }
  })])
  const infer = inferrer(t)

  const inFlight = infer(table, 'm')
  const alongside = infer(table, 'm')
  await running.promise
  table.unload('m')
  await new Promise((resolve) => setImmediate(resolve))
  t.same(calls, [], 'the unload hook waits for the request in flight')
  const load = table.load('m')
  t.same(states(table), ['m/1 LOADING'], 'loading')
  t.equal(table.isModelReady('m'), false)
  const waiting = infer(table, 'm')
  goOn.resolve()
  t.equal(await inFlight, 'ok', 'the requests in flight finish')
  t.equal(await alongside, 'ok')
  await new Promise((resolve) => setImmediate(resolve))
  t.same(calls, ['unload', 'load starts'], 'then the unload hook runs, then the load hook')
  loading.resolve()
  await load
  t.equal(await waiting, 'ok', 'a request sent while the model loaded waited for it')
  t.same(calls, ['unload', 'load starts', 'load ends'])
  t.same(states(table), ['m/1 READY'])
  t.equal(table.statistics('m').model_stats[0].inference_stats.success.count, 3)
})

t.test('hooks that fail where no request reports them are logged', async (t) => {
  const store = storePath(t)
  const logged: Array<{ object: object, message: string }> = []
  const log = { error: (object: object, message: string) => { logged.push({ object, message }) } }
  const failing = model('m', { load: () => { throw new Error('cannot load here') }, unload: () => { throw new Error('cannot unload here') } })
  const registries = [0, 1].map(() => new Registry({ sharedRegistry: { path: store, checkIntervalMs: 20 } }))
  t.teardown(() => registries.forEach((registry) => registry.close()))
  const [asking, other] = registries.map((registry, index) => {
    const table = new ModelTable([index === 0 ? model('m', { load () {}, unload () {} }) : failing], { repository: true, log })
    table.serveWith(registry)
    return table
  })
  await asking.unload('m')
  await new Promise((resolve) => setImmediate(resolve))
  t.same(logged, [{ object: { model: 'm', version: '1', reason: 'cannot unload here' }, message: 'a model version failed to unload' }])
  // A hook that fails in another process fails the load, as Triton reports a failed load.
  await t.rejects(asking.load('m'), { code: 'ERR_SHM_LOAD_FAILED', message: "load failed for model 'm': version 1 is at UNAVAILABLE state: cannot load here;" })
  t.same(logged[1], {
    object: { model: 'm', version: '1', reason: 'cannot load here' },
    message: 'a model loaded by another process of the service failed to load in this one'
  })
  t.same(states(other), ['m/1 UNAVAILABLE (cannot load here)'], 'unavailable there')
  t.same(states(asking), ['m/1 UNAVAILABLE (cannot load here)'], 'and in the process that asked, where it was unloaded again')

  // A change no process told the others of (its writer died before it could) is applied at their store's checks.
  const before = logged.length
  registries[0].modelStore().write('m', { loaded: true, reason: '' })
  let check: NodeJS.Timeout | undefined
  await bounded(new Promise<void>((resolve) => {
    check = setInterval(() => { if (logged.length > before) resolve() }, 5)
  }), 'the store\'s check applying the load').finally(() => clearInterval(check))
  t.equal(logged[before].message, 'a model loaded by another process of the service failed to load in this one')
})

t.test('a table joining a service applies what its store holds', async (t) => {
  const store = storePath(t)
  const registries = [0, 1, 2].map(() => new Registry({ sharedRegistry: { path: store, checkIntervalMs: 1000 } }))
  t.teardown(() => registries.forEach((registry) => registry.close()))
  const calls: string[] = []
  const hooked = (tag: string) => model('m', { load: (_version: string, overrides: ModelLoadOverrides) => { calls.push(`${tag} load ${overrides.config ?? ''}`) } })
  const first = new ModelTable([hooked('first'), model('gone'), model('other')], { repository: { allowOverrides: true } })
  first.serveWith(registries[0])
  first.unload('gone')
  await first.load('other')

  const second = new ModelTable([hooked('second'), model('gone'), model('other')], { repository: true })
  await first.load('m')
  t.same(calls, ['first load '])
  second.serveWith(registries[1])
  t.same(states(second), ['gone/1 UNAVAILABLE (unloaded)', 'm/1 READY', 'other/1 READY'], 'an unloaded model is unloaded here too')
  await new Promise((resolve) => setImmediate(resolve))
  t.same(calls, ['first load '], 'a load without overrides is the one the host made at startup: no hook runs in a process that joins')
  await second.unload('m')
  t.same(states(first).filter((state) => state.startsWith('m/')), ['m/1 UNAVAILABLE (unloaded)'], 'an unload returns once no process serves the model')
  calls.length = 0
  await first.load('m')
  t.same(calls.sort(), ['first load ', 'second load '], 'a load after it joined runs its hooks there, before the load returns')
  t.same(states(second).filter((state) => state.startsWith('m/')), ['m/1 READY'], 'and the model is ready there')
  calls.length = 0
  await first.load('m', { config: '{"x":1}', files: {} })
  const third = new ModelTable([hooked('third'), model('files', { load: (_version, { files }) => { calls.push(`files ${Object.keys(files)}`) } })], { repository: true })
  third.serveWith(registries[2])
  await new Promise((resolve) => setImmediate(resolve))
  t.same(calls.sort(), ['first load {"x":1}', 'second load {"x":1}', 'third load {"x":1}'], 'a load with overrides is applied by a process that joins later')
  const files = new ModelTable([model('files', { load: () => {} })], { repository: { allowOverrides: true } })
  files.serveWith(registries[0])
  await files.load('files', { files: { 'file:1/model.onnx': Buffer.from('graph') } })
  third.index()
  await new Promise((resolve) => setImmediate(resolve))
  t.equal(calls.at(-1), 'files file:1/model.onnx', 'files without a configuration reach every process')
  t.same(states(third), ['files/1 READY', 'm/1 READY'])
})

t.test('the table\'s options are checked', async (t) => {
  t.throws(() => new ModelTable([], { repository: 'yes' } as never), { code: 'ERR_SHM_INVALID_OPTION', message: /^fastify-triton-shm model table: option 'repository'/ })
  t.throws(() => new ModelTable([], { repository: 'yes' } as never), { message: "fastify-triton-shm model table: option 'repository' must be boolean" })
  t.throws(() => new ModelTable([], { repository: { allow: true } } as never), { message: "fastify-triton-shm model table: unknown option 'repository.allow'" })
  t.throws(() => new ModelTable([], { log: {} } as never), { message: /option 'log' must have required property 'error'/ })
  t.throws(() => new ModelTable([], { colour: 'blue' } as never), { message: "fastify-triton-shm model table: unknown option 'colour'" })
  t.throws(() => new ModelTable([model('m', { load: 'no' as never })]), { code: 'ERR_SHM_INVALID_MODEL_DECLARATION', message: /'load' must be a function/ })
})

t.test('a request that finds another process\'s load waits for this process\'s hook', async (t) => {
  const store = storePath(t)
  const registries = [0, 1].map(() => new Registry({ sharedRegistry: { path: store, checkIntervalMs: 1000 } }))
  t.teardown(() => registries.forEach((registry) => registry.close()))
  const loaded = deferred()
  const hookCalled = deferred()
  const [asking, serving] = [model('m', { load () {} }), model('m', {
    load: () => {
      hookCalled.resolve()
      return loaded.promise
    }
  })].map((declaration, index) => {
    const table = new ModelTable([declaration], { repository: true })
    table.serveWith(registries[index])
    return table
  })
  await asking.unload('m')
  t.same(states(serving), ['m/1 UNAVAILABLE (unloaded)'])
  const load = asking.load('m')
  await hookCalled.promise
  const infer = inferrer(t)
  const answer = infer(serving, 'm')
  await new Promise((resolve) => setImmediate(resolve))
  t.same(states(serving), ['m/1 LOADING'], 'its request read the load, and waits')
  loaded.resolve()
  await load
  t.equal(serving.isModelReady('m'), true, 'the load returned once the other process serves the model')
  t.equal(await answer, 'ok')
})

t.test('a name to load is checked as Triton checks it: blank, or one that could traverse a path, before the model is looked up', async (t) => {
  const calls: string[] = []
  const table = new ModelTable([model('m', { load: () => { calls.push('load') } }), model('..my_model')], { repository: true })
  for (const name of ['', ' ', '   ', '\t', '\n', '\r', '\f', '\v', ' \t \n ']) {
    await t.rejects(table.load(name), { code: 'ERR_SHM_MODEL_NAME_EMPTY', kind: 'invalid', message: 'Model name cannot be empty. Please enter a valid name to deploy.' },
      JSON.stringify(name))
  }
  for (const name of ['../etc', 'a/../b', '../../etc/passwd', 'model/..', '..', '/etc/passwd', 'model/subdir', 'model/', ' ..', '.. ', 'm/']) {
    await t.rejects(table.load(name), {
      code: 'ERR_SHM_MODEL_NAME_TRAVERSAL',
      kind: 'invalid',
      message: `invalid model name '${name}', model name must not contain path traversal characters`
    }, `${JSON.stringify(name)}, named as sent`)
  }
  for (const name of ['model.version1', '...', 'model..1', '\u00a0', 'a\\..\\b']) {
    await t.rejects(table.load(name), { code: 'ERR_SHM_LOAD_UNKNOWN_MODEL' }, `${JSON.stringify(name)}: a name Triton takes (C's whitespace only is trimmed)`)
  }
  await table.load('..my_model')
  await table.load(' m '.trim())
  t.same(calls, ['load'], 'a valid name loads')
  await table.unload('../etc')
  await table.unload('')
  t.same(states(table), ['..my_model/1 READY', 'm/1 READY'], 'an unload checks no name, as Triton\'s: an unknown one succeeds')
})

t.test('control mode none: the index is served, load and unload are refused with Triton\'s UNAVAILABLE, before any other check', async (t) => {
  const calls: string[] = []
  const table = new ModelTable([model('m', { load: () => { calls.push('load') }, unload: () => { calls.push('unload') } })],
    { repository: { controlMode: 'none', allowOverrides: false } })
  t.equal(table.servesRepository, true)
  t.same(states(table), ['m/1 READY'])
  const refused = { code: 'ERR_SHM_MODEL_CONTROL_DISABLED', kind: 'unavailable', message: 'explicit model load / unload is not allowed if polling is enabled' }
  for (const name of ['m', 'nope', '', '../etc']) {
    await t.rejects(table.load(name, { config: '{}', files: {} }), refused, `load ${JSON.stringify(name)}`)
    await t.rejects(table.unload(name), refused, `unload ${JSON.stringify(name)}`)
  }
  await new Promise((resolve) => setImmediate(resolve))
  t.same(calls, [], 'no hook ran')
  t.same(states(table), ['m/1 READY'], 'nothing changed')
  const explicit = new ModelTable([model('m')], { repository: { controlMode: 'explicit' } })
  await explicit.unload('m')
  t.same(states(explicit), ['m/1 UNAVAILABLE (unloaded)'], 'explicit: served, as without the option')
})

t.test('startupModels: the others start unloaded, load on request, and keep the server ready', async (t) => {
  const calls: string[] = []
  const table = new ModelTable([model('a', { load: () => { calls.push('load a') }, unload: () => { calls.push('unload a') } }), model('b'), model('c')],
    { repository: { controlMode: 'explicit', startupModels: ['b'] } })
  t.same(states(table), ['a/1 UNAVAILABLE (unloaded)', 'b/1 READY', 'c/1 UNAVAILABLE (unloaded)'])
  t.equal(await inferrer(t)(table, 'a'), "Request for unknown model: 'a' has no available versions")
  t.equal(table.isReady(), true, 'models left out at startup keep no server from being ready')
  t.same(table.metricVersions().map(({ name }) => name), ['b'])
  await table.load('a')
  t.same(calls, ['load a'], 'no unload hook ran at startup; the load runs its hook')
  t.same(states(table, true), ['a/1 READY', 'b/1 READY'])
  t.same(states(new ModelTable([model('a')], { repository: { startupModels: [] } })), ['a/1 UNAVAILABLE (unloaded)'], 'an empty list loads none')

  t.throws(() => new ModelTable([model('a')], { repository: { startupModels: ['a', 'nope'] } }), {
    code: 'ERR_SHM_INVALID_OPTION',
    message: "fastify-triton-shm model table: option 'repository.startupModels' names 'nope', which the table does not declare"
  })
  t.throws(() => new ModelTable([model('a')], { repository: { controlMode: 'none', startupModels: ['a'] } }), {
    code: 'ERR_SHM_INVALID_OPTION',
    message: "fastify-triton-shm model table: option 'repository.startupModels' needs option 'repository.controlMode' to be 'explicit'"
  })
  t.throws(() => new ModelTable([], { repository: { controlMode: 'poll' } } as never), { message: /option 'repository.controlMode' must be equal to one of the allowed values/ })
  t.throws(() => new ModelTable([], { repository: { startupModels: 'a' } } as never), { message: /option 'repository.startupModels' must be array/ })
})

t.test('startupModels with a shared registry: a process that joins leaves out the same models, and applies the loads made since', async (t) => {
  const store = storePath(t)
  const registries = [0, 1].map(() => new Registry({ sharedRegistry: { path: store, checkIntervalMs: 1000 } }))
  t.teardown(() => registries.forEach((registry) => registry.close()))
  const calls: string[] = []
  const tableOf = (tag: string) => {
    const table = new ModelTable([model('a', { load: () => { calls.push(`${tag} load a`) } }), model('b'), model('c')],
      { repository: { startupModels: ['b'] } })
    return table
  }
  const first = tableOf('first')
  first.serveWith(registries[0])
  await first.load('a')
  const second = tableOf('second')
  second.serveWith(registries[1])
  await new Promise((resolve) => setImmediate(resolve))
  t.same(states(second), ['a/1 READY', 'b/1 READY', 'c/1 UNAVAILABLE (unloaded)'], 'a loaded since startup, c left out, in the process that joins')
  t.same(calls, ['first load a', 'second load a'], 'the joining process ran the load hook of the model it did not load at startup')
})
