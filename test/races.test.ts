/**
 * Races: many requests register, unregister, list and use the same region names at once, over
 * app.inject, over a real socket, and programmatically interleaved with leases. Whatever the
 * interleaving:
 * - a name maps to one registration at a time, and every answer (register, unregister, status)
 *   is consistent with the registry's state at some moment while that request was in flight;
 * - a lease never sees unmapped memory: its buffer keeps its length and the client's bytes;
 * - every region is unmapped exactly once (one "unregistered" log line, its /proc/self/maps entry
 *   and its file descriptor gone then, and not before);
 * - inferences racing with unregister-all and re-registration write their results whole into the
 *   region they resolved, or are refused cleanly.
 * How much concurrency each test gets is fixed by barriers and gates (helpers/sync.ts), never by
 * how the scheduler happens to run: no sleeps, no clocks, the same on an idle or a loaded machine.
 * Real shared memory objects, unique names, removed on teardown.
 */
import { spawnSync } from 'node:child_process'
import { once } from 'node:events'
import { closeSync, openSync, readFileSync, writeSync } from 'node:fs'
import http from 'node:http'
import path from 'node:path'
import fc from 'fast-check'
import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify'
import t, { type Test } from 'tap'
import { buildServer } from '../example/server'
import { TritonError } from '../lib/errors'
import fastifyTritonShm from '../lib/index'
import { Registry } from '../lib/registry/registry'
import type { Lease, SharedMemoryRegionStatus } from '../types'
import { registerBody, SYSTEM } from './helpers/app'
import { shmInput, shmOutput } from './helpers/kserve'
import { DEFERRED, fdsOf, LEVEL, LogCapture, type LogLine, REGISTERED, shmFdTargets, UNREGISTERED } from './helpers/observe'
import { makeObject, mappingsOf, objectPath, openFdCount, PAGE_SIZE, shmMappings } from './helpers/shm'
import { bounded, Gate, GroupBarrier, PATIENCE_MS, whenEvent } from './helpers/sync'

// Small deterministic randomness, so a failing interleaving can be replayed from its seed.
function randomFrom (seed: number): () => number {
  let state = seed >>> 0
  return () => {
    state = (state + 0x6d2b79f5) >>> 0
    let value = state
    value = Math.imul(value ^ (value >>> 15), value | 1)
    value ^= value + Math.imul(value ^ (value >>> 7), value | 61)
    return ((value ^ (value >>> 14)) >>> 0) / 2 ** 32
  }
}
const SEED = Number(process.env.RACES_SEED ?? Date.now() % 2 ** 31)

/** Writes `bytes` at `position` of an object through its file, as another process would. */
function writeObject (key: string, position: number, bytes: Uint8Array): void {
  const fd = openSync(objectPath(key), 'r+')
  try {
    writeSync(fd, bytes, 0, bytes.length, position)
  } finally {
    closeSync(fd)
  }
}

/** How many /proc/self/maps entries and open descriptors each key has, from one read of each. */
function holdings (keys: string[]): Map<string, { mappings: number, fds: number }> {
  const maps = shmMappings()
  const fds = shmFdTargets()
  const isOf = (key: string) => (entry: string) =>
    entry.endsWith(objectPath(key)) || entry.endsWith(`${objectPath(key)} (deleted)`)
  return new Map(keys.map((key) => [key, { mappings: maps.filter(isOf(key)).length, fds: fds.filter(isOf(key)).length }]))
}

// ---------------------------------------------------------------------------------------------
// Replaying the log: the registry's state at every moment, as its own log lines tell it.

interface Registration { name: string, key: string, offset: number, byteSize: number }

const statusOf = ({ name, key, offset, byteSize }: Registration): SharedMemoryRegionStatus =>
  ({ name, key, offset, byte_size: byteSize })

interface Replay {
  /** What the log itself contradicts: a name registered twice, an unregister of something else. */
  problems: string[]
  /** `states[v]`: the regions after the v-th change, sorted as status lists them. */
  states: SharedMemoryRegionStatus[][]
  /** The state version in force after each log line. */
  versionAt: number[]
  /** Index of each request's "incoming request" and "request completed" lines, by request id. */
  spans: Map<string, { from: number, to: number }>
  /** Most requests in flight at once. */
  peakInFlight: number
}

function replay (lines: LogLine[]): Replay {
  const problems: string[] = []
  const regions = new Map<string, Registration>()
  const states: SharedMemoryRegionStatus[][] = [[]]
  const versionAt: number[] = []
  const spans = new Map<string, { from: number, to: number }>()
  let inFlight = 0
  let peakInFlight = 0
  const snapshot = () => states.push([...regions.values()].sort((a, b) => (a.name < b.name ? -1 : 1)).map(statusOf))
  lines.forEach((line, index) => {
    const name = line.region as string
    if (line.msg === REGISTERED) {
      if (regions.has(name)) problems.push(`line ${index}: '${name}' registered while it held a registration`)
      regions.set(name, { name, key: line.key as string, offset: line.offset as number, byteSize: line.byteSize as number })
      snapshot()
    } else if (line.msg === UNREGISTERED) {
      const held = regions.get(name)
      if (held === undefined || held.key !== line.key || held.byteSize !== line.byteSize) {
        problems.push(`line ${index}: '${name}' unregistered, but it held ${JSON.stringify(held)}: ${JSON.stringify(line)}`)
      }
      regions.delete(name)
      snapshot()
    } else if (line.msg === 'incoming request') {
      spans.set(line.reqId as string, { from: index, to: -1 })
      peakInFlight = Math.max(peakInFlight, ++inFlight)
    } else if (line.msg === 'request completed') {
      const span = spans.get(line.reqId as string)
      if (span !== undefined) span.to = index
      inFlight--
    }
    versionAt.push(states.length - 1)
  })
  return { problems, states, versionAt, spans, peakInFlight }
}

// ---------------------------------------------------------------------------------------------
// HTTP storms

type Kind = 'register' | 'unregister' | 'status' | 'regionStatus' | 'unregisterAll'

interface StormRequest {
  id: string
  kind: Kind
  method: 'GET' | 'POST'
  url: string
  payload?: string
  name?: string
  /** For a register: what it asks for. Its byte size is unique, so its log line names it. */
  registration?: Registration
}

interface Answer { statusCode: number, body: string }

type Send = (request: StormRequest) => Promise<Answer>

const NAMES = ['r0', 'r1', 'a b', 'π%+', 'r4']
const OBJECT_BYTES = 4 * PAGE_SIZE

function planStorm (keys: string[], count: number, firstSize: number, random: () => number, wave: number): StormRequest[] {
  const requests: StormRequest[] = []
  for (let index = 0; index < count; index++) {
    const name = NAMES[Math.floor(random() * NAMES.length)]
    const region = `${SYSTEM}/region/${encodeURIComponent(name)}`
    const roll = random()
    const id = `w${wave}-${index}`
    if (roll < 0.45) {
      // Offset 0 for every mapping: two mappings of one object can then never merge into one
      // /proc/self/maps entry, so entries count mappings.
      const registration = { name, key: keys[index % keys.length], offset: 0, byteSize: firstSize + index }
      requests.push({
        id,
        kind: 'register',
        method: 'POST',
        url: `${region}/register`,
        name,
        registration,
        payload: registerBody(registration.key, registration.byteSize)
      })
    } else if (roll < 0.77) {
      requests.push({ id, kind: 'unregister', method: 'POST', url: `${region}/unregister`, name })
    } else if (roll < 0.87) {
      requests.push({ id, kind: 'status', method: 'GET', url: `${SYSTEM}/status` })
    } else if (roll < 0.97) {
      requests.push({ id, kind: 'regionStatus', method: 'GET', url: `${region}/status`, name })
    } else {
      requests.push({ id, kind: 'unregisterAll', method: 'POST', url: `${SYSTEM}/unregister` })
    }
  }
  return requests
}

const sameStatus = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b)

/**
 * Checks every answer against the replayed log: the answer must be the registry's answer at some
 * state in force while the request was in flight. Returns the problems found.
 */
function checkAnswers (log: LogLine[], history: Replay, requests: StormRequest[], answers: Answer[]): string[] {
  const problems = [...history.problems]
  requests.forEach((request, index) => {
    const answer = answers[index]
    const span = history.spans.get(request.id)
    if (span === undefined || span.to < 0) {
      problems.push(`${request.id}: no complete request log`)
      return
    }
    const states = history.states.slice(history.versionAt[span.from], history.versionAt[span.to] + 1)
    const some = (holds: (state: SharedMemoryRegionStatus[]) => boolean) => states.some(holds)
    const listed = (state: SharedMemoryRegionStatus[]) => state.find((region) => region.name === request.name)
    const describe = `${request.id} ${request.kind} ${request.name ?? ''} -> ${answer.statusCode} ${answer.body}`
    switch (request.kind) {
      case 'register': {
        const { name, key, byteSize } = request.registration as Registration
        const logged = log.flatMap((line, at) =>
          line.msg === REGISTERED && line.region === name && line.key === key && line.byteSize === byteSize ? [at] : [])
        if (answer.statusCode === 200) {
          if (logged.length !== 1 || logged[0] < span.from || logged[0] > span.to) {
            problems.push(`${describe}: logged as registered at ${JSON.stringify(logged)}, not once within ${JSON.stringify(span)}`)
          }
        } else if (answer.body === JSON.stringify({ error: `shared memory region '${name}' already in manager` })) {
          if (logged.length !== 0) problems.push(`${describe}: refused, yet logged as registered`)
          if (!some((state) => listed(state) !== undefined)) problems.push(`${describe}: refused as a duplicate, but the name was free all along`)
        } else {
          problems.push(`${describe}: unexpected answer`)
        }
        break
      }
      case 'unregister':
        if (answer.statusCode !== 200 || answer.body !== '') problems.push(`${describe}: unexpected answer`)
        else if (!some((state) => listed(state) === undefined)) problems.push(`${describe}: the name was never free while it ran`)
        break
      case 'unregisterAll':
        if (answer.statusCode !== 200 || answer.body !== '') problems.push(`${describe}: unexpected answer`)
        else if (!some((state) => state.length === 0)) problems.push(`${describe}: the registry was never empty while it ran`)
        break
      case 'status': {
        const body = answer.statusCode === 200 ? JSON.parse(answer.body) as SharedMemoryRegionStatus[] : undefined
        const names = body?.map((region) => region.name) ?? []
        if (new Set(names).size !== names.length) problems.push(`${describe}: a name is listed twice`)
        if (body === undefined || !some((state) => sameStatus(state, body))) problems.push(`${describe}: no state ever looked like this`)
        break
      }
      case 'regionStatus':
        if (answer.statusCode === 200) {
          const body = JSON.parse(answer.body) as SharedMemoryRegionStatus[]
          if (!some((state) => sameStatus([listed(state)], body))) problems.push(`${describe}: the region never had this status`)
        } else if (answer.statusCode === 404 &&
          answer.body === JSON.stringify({ error: `Unable to find system shared memory region: '${request.name}'` })) {
          if (!some((state) => listed(state) === undefined)) problems.push(`${describe}: 404 while the name was registered all along`)
        } else {
          problems.push(`${describe}: unexpected answer`)
        }
    }
  })
  return problems
}

/** Requests of a storm go on in groups of this many, all in flight at once (see GroupBarrier). */
const GROUP = 25

/** An app whose pino logger writes to `capture`, taking request ids from the `x-test-id` header;
 * each request waits at `barrier` first (it is logged as incoming before). */
async function loggedApp (t: Test, capture: LogCapture, barrier: GroupBarrier): Promise<FastifyInstance> {
  const app = Fastify({ logger: { level: 'info', stream: capture.stream }, requestIdHeader: 'x-test-id' })
  t.teardown(() => app.close())
  app.addHook('onRequest', barrier.arrive)
  await app.register(fastifyTritonShm)
  await app.ready()
  return app
}

/** Runs `waves` storms of `perWave` concurrent requests through `send`, checking each; then
 * unregisters everything and checks that every region was unmapped exactly once. The app's
 * requests wait at `barrier`, so each wave has groups of GROUP requests in flight at once. */
async function stormTest (t: Test, app: FastifyInstance, capture: LogCapture, send: Send, waves: number, perWave: number,
  barrier: GroupBarrier) {
  const keys = [makeObject(t, OBJECT_BYTES, 'storm0'), makeObject(t, OBJECT_BYTES, 'storm1'), makeObject(t, OBJECT_BYTES, 'storm2')]
  const random = randomFrom(SEED)
  let answered = 0
  let overlapping = 0
  for (let wave = 0; wave < waves; wave++) {
    const requests = planStorm(keys, perWave, 1 + wave * perWave, random, wave)
    barrier.arm(perWave, GROUP)
    const answers = await Promise.all(requests.map(send))
    barrier.disarm()
    answered += answers.length
    const history = replay(capture.lines)
    const problems = checkAnswers(capture.lines, history, requests, answers)
    t.same(problems.slice(0, 10), [], `wave ${wave} (seed ${SEED}): every answer matches a state the registry was in meanwhile`)
    t.ok(history.peakInFlight >= GROUP, `wave ${wave}: groups of ${GROUP} requests in flight at once (peak ${history.peakInFlight})`)
    overlapping += requests.filter((request) => {
      const span = history.spans.get(request.id)
      return span !== undefined && history.versionAt[span.to] - history.versionAt[span.from] >= 2
    }).length

    // Between waves, the registry, the log, the mappings and the descriptors all agree.
    const final = history.states[history.states.length - 1]
    t.same(app.systemSharedMemory.status(), final, `wave ${wave}: status is the state the log describes`)
    const held = holdings(keys)
    for (const key of keys) {
      const registered = final.filter((region) => region.key === key).length
      t.same(held.get(key), { mappings: registered, fds: registered }, `wave ${wave}: one mapping and one descriptor per registration of ${key}`)
    }
  }
  // The last request of each group to finish saw every change the others of its group made.
  t.ok(overlapping > 0, `${overlapping} requests saw other requests change the registry while they ran`)

  const all = await send({ id: 'final', kind: 'unregisterAll', method: 'POST', url: `${SYSTEM}/unregister` })
  t.equal(all.statusCode, 200)
  t.same(app.systemSharedMemory.status(), [])
  for (const key of keys) t.same(mappingsOf(key), [], `${key}: unmapped`)
  t.equal(shmFdTargets().length, 0, 'no descriptor on any shared memory object')
  return answered
}

/**
 * Every registration in the log was unregistered exactly once: per name, each "registered" line is
 * followed by one "unregistered" line for the same object and size before the name is registered
 * again, no "unregistered" line stands without its registration, and none is left open.
 */
function unmappedOnce (t: Test, log: LogLine[]) {
  const open = new Map<string, LogLine>()
  const problems: string[] = []
  let registrations = 0
  for (const line of log) {
    const name = line.region as string
    if (line.msg === REGISTERED) {
      registrations++
      if (open.has(name)) problems.push(`'${name}' registered again before it was unregistered`)
      open.set(name, line)
    } else if (line.msg === UNREGISTERED) {
      const registration = open.get(name)
      if (registration === undefined || registration.key !== line.key || registration.byteSize !== line.byteSize) {
        problems.push(`'${name}' unregistered without a registration to match: ${JSON.stringify(line)}`)
      }
      open.delete(name)
    }
  }
  t.ok(registrations > 0, `${registrations} registrations in the log`)
  t.same(problems.slice(0, 10), [], 'each registration unregistered once, and only once')
  t.same([...open.keys()], [], 'none left mapped')
}

t.test('concurrent app.inject storms on the same names', async (t) => {
  const capture = new LogCapture()
  const barrier = new GroupBarrier()
  const app = await loggedApp(t, capture, barrier)
  const fdsBefore = openFdCount()
  const send: Send = async ({ method, url, payload, id }) => {
    const response = await app.inject({ method, url, payload, headers: { 'x-test-id': id } })
    return { statusCode: response.statusCode, body: response.body }
  }
  const answered = await stormTest(t, app, capture, send, 4, 400, barrier)
  t.equal(answered, 1600)
  unmappedOnce(t, capture.lines)
  t.equal(openFdCount(), fdsBefore, 'as many descriptors as before')
})

/**
 * POSTs `payload` over a keep-alive `agent` in two parts, `delayMs` apart: the server reads the
 * headers of many requests, and answers others, before it has the whole body of one.
 */
function postInParts (agent: http.Agent, port: number, url: string, id: string, payload: string, delayMs: number): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const request = http.request({ agent, host: '127.0.0.1', port, path: url, method: 'POST', headers: { 'x-test-id': id } }, (response) => {
      let body = ''
      response.setEncoding('utf8')
      response.on('data', (chunk: string) => { body += chunk })
      response.on('end', () => resolve({ statusCode: response.statusCode ?? 0, body }))
    })
    request.on('error', reject)
    const half = Math.floor(payload.length / 2)
    request.write(payload.slice(0, half))
    setTimeout(() => request.end(payload.slice(half)), delayMs)
  })
}

t.test('concurrent requests on a real socket (fetch, and bodies sent in parts), on the same names', async (t) => {
  const capture = new LogCapture()
  const app = Fastify({ logger: { level: 'info', stream: capture.stream }, requestIdHeader: 'x-test-id', forceCloseConnections: true })
  t.teardown(() => app.close())
  const barrier = new GroupBarrier()
  app.addHook('onRequest', barrier.arrive)
  await app.register(fastifyTritonShm)
  await app.listen({ host: '127.0.0.1', port: 0 })
  const { port } = app.server.address() as { port: number }
  const agent = new http.Agent({ keepAlive: true, maxSockets: 256 })
  t.teardown(() => agent.destroy())
  const random = randomFrom(SEED + 3)
  const send: Send = async ({ method, url, payload, id }) => {
    if (method === 'POST' && random() < 0.8) return postInParts(agent, port, url, id, payload ?? '{}', 20 + Math.floor(random() * 150))
    const response = await fetch(`http://127.0.0.1:${port}${url}`, { method, body: payload, headers: { 'x-test-id': id } })
    return { statusCode: response.status, body: await response.text() }
  }
  // Both kinds of client open their connections first, so that the storms are not serialized
  // behind connection set-up.
  await Promise.all(Array.from({ length: 150 }, (_, index) => index % 2 === 0
    ? postInParts(agent, port, `${SYSTEM}/region/warm/unregister`, `warm-${index}`, '', 1)
    : fetch(`http://127.0.0.1:${port}${SYSTEM}/status`).then((response) => response.text())))
  capture.clear()
  await stormTest(t, app, capture, send, 3, 300, barrier)
  unmappedOnce(t, capture.lines)
})

// ---------------------------------------------------------------------------------------------
// Programmatic interleavings with leases, against a model

type Operation =
  | { op: 'register', name: number, key: number, size: number }
  | { op: 'acquire', name: number, at: number, length: number }
  | { op: 'release', lease: number }
  | { op: 'unregister', name: number }
  | { op: 'unregisterAll' }
  | { op: 'write', key: number, at: number, value: number }

const unit = fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true })
const nameIndex = fc.integer({ min: 0, max: 2 })
const operation: fc.Arbitrary<Operation> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ op: fc.constant('register' as const), name: nameIndex, key: fc.integer({ min: 0, max: 3 }), size: unit }) },
  { weight: 4, arbitrary: fc.record({ op: fc.constant('acquire' as const), name: nameIndex, at: unit, length: unit }) },
  { weight: 4, arbitrary: fc.record({ op: fc.constant('release' as const), lease: fc.nat() }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('unregister' as const), name: nameIndex }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('unregisterAll' as const) }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('write' as const), key: fc.integer({ min: 0, max: 3 }), at: unit, value: fc.integer({ min: 0, max: 255 }) }) }
)

interface ModelRegion extends Registration { keyIndex: number, leases: number, pending: boolean }
interface ModelLease { lease: Lease, region: ModelRegion, offset: number, length: number, released: boolean }

t.test('register/acquire/release/unregister interleavings keep leases whole and unmap each region once', async (t) => {
  const MODEL_OBJECT_BYTES = 2 * PAGE_SIZE
  const keys = [0, 1, 2, 3].map((index) => makeObject(t, MODEL_OBJECT_BYTES, `model${index}`))
  const names = ['a', 'b', 'c']
  const capture = new LogCapture()
  const logger = capture.logger('debug')
  let steps = 0
  let deferredSeen = 0
  let leasesOutlivingUnregister = 0

  const property = fc.property(fc.array(operation, { minLength: 10, maxLength: 80, size: 'max' }), (operations) => {
    // The objects' bytes as the client wrote them; each run starts from new random contents.
    const contents = keys.map((key) => {
      const bytes = Uint8Array.from({ length: MODEL_OBJECT_BYTES }, () => Math.floor(Math.random() * 256))
      writeObject(key, 0, bytes)
      return bytes
    })
    const registry = new Registry({ logger })
    const regions = new Map<string, ModelRegion>()
    const leases: ModelLease[] = []
    const removed: ModelRegion[] = []
    capture.clear()
    const fail = (message: string) => { throw new Error(`step ${steps}: ${message}`) }
    const expectLog = (expected: Array<Partial<LogLine>>) => {
      const seen = capture.lines.map(({ msg, region, key, byteSize }) =>
        msg === DEFERRED ? { msg, region } : { msg, region, key, byteSize })
      if (!sameStatus(seen, expected)) fail(`logged ${JSON.stringify(seen)}, expected ${JSON.stringify(expected)}`)
      capture.clear()
    }
    const unmappedLine = (region: ModelRegion) => ({ msg: UNREGISTERED, region: region.name, key: region.key, byteSize: region.byteSize })
    const remove = (region: ModelRegion) => {
      regions.delete(region.name)
      removed.push(region)
      return unmappedLine(region)
    }
    const unregisterModel = (region: ModelRegion) => {
      if (region.leases === 0) return remove(region)
      region.pending = true
      deferredSeen++
      return { msg: DEFERRED, region: region.name }
    }

    try {
      for (const step of operations) {
        steps++
        switch (step.op) {
          case 'register': {
            const name = names[step.name]
            const byteSize = 1 + Math.floor(step.size * MODEL_OBJECT_BYTES)
            const registration = { name, key: keys[step.key], offset: 0, byteSize }
            if (regions.has(name)) {
              let thrown: unknown
              try { registry.register(name, registration) } catch (error) { thrown = error }
              if (!(thrown instanceof TritonError) || thrown.message !== `shared memory region '${name}' already in manager`) {
                fail(`registering '${name}' twice gave ${String(thrown)}`)
              }
              capture.clear() // refusals at debug are logging.test.ts's subject
            } else {
              registry.register(name, registration)
              regions.set(name, { ...registration, keyIndex: step.key, leases: 0, pending: false })
              expectLog([{ msg: REGISTERED, region: name, key: registration.key, byteSize }])
            }
            break
          }
          case 'acquire': {
            const region = regions.get(names[step.name])
            if (region === undefined) {
              let code: string | undefined
              try { registry.acquire(names[step.name], 0, 1) } catch (error) { code = (error as TritonError).code }
              if (code !== 'ERR_SHM_REGION_NOT_FOUND') fail(`acquiring unknown '${names[step.name]}' gave ${code}`)
              break
            }
            const offset = Math.floor(step.at * region.byteSize)
            const length = 1 + Math.floor(step.length * (region.byteSize - offset))
            leases.push({ lease: registry.acquire(region.name, offset, length), region, offset, length, released: false })
            region.leases++
            if (region.pending) leasesOutlivingUnregister++
            expectLog([])
            break
          }
          case 'release': {
            if (leases.length === 0) break
            const held = leases[step.lease % leases.length]
            held.lease.release() // a second release of the same lease must change nothing
            const expected = []
            if (!held.released) {
              held.released = true
              held.region.leases--
              if (held.region.leases === 0 && held.region.pending) expected.push(remove(held.region))
            }
            expectLog(expected)
            break
          }
          case 'unregister': {
            registry.unregister(names[step.name])
            const region = regions.get(names[step.name])
            expectLog(region === undefined ? [] : [unregisterModel(region)])
            break
          }
          case 'unregisterAll': {
            registry.unregisterAll()
            expectLog([...regions.values()].map(unregisterModel))
            break
          }
          case 'write': {
            const at = Math.floor(step.at * MODEL_OBJECT_BYTES)
            writeObject(keys[step.key], at, Uint8Array.of(step.value))
            contents[step.key][at] = step.value
            expectLog([])
          }
        }

        // Invariants after every step.
        const expectedStatus = [...regions.values()].sort((a, b) => (a.name < b.name ? -1 : 1)).map(statusOf)
        if (!sameStatus(registry.status(), expectedStatus)) fail(`status ${JSON.stringify(registry.status())}, expected ${JSON.stringify(expectedStatus)}`)
        for (const held of leases) {
          if (held.released && removed.includes(held.region)) {
            if (held.lease.buffer.length !== 0) fail('a view over an unmapped region still reads bytes')
            continue
          }
          if (held.released) continue
          const { lease, region, offset, length } = held
          if (lease.buffer.length !== length) fail(`a live lease of '${region.name}' shrank to ${lease.buffer.length} bytes`)
          const expected = contents[region.keyIndex].subarray(offset, offset + length)
          if (Buffer.compare(lease.buffer, expected) !== 0) fail(`a live lease of '${region.name}' does not read the client's bytes`)
        }
        const held = holdings(keys)
        keys.forEach((key) => {
          const mapped = [...regions.values()].filter((region) => region.key === key).length
          const seen = held.get(key)
          if (seen?.mappings !== mapped || seen.fds !== mapped) fail(`${key}: ${JSON.stringify(seen)}, expected ${mapped} mappings and descriptors`)
        })
      }

      // The end of a run: every lease released, everything unregistered, nothing mapped.
      for (const held of leases) held.lease.release()
      registry.unregisterAll()
      if (registry.status().length !== 0) fail('regions left after releasing everything')
      const held = holdings(keys)
      if (keys.some((key) => held.get(key)?.mappings !== 0 || held.get(key)?.fds !== 0)) fail(`left mapped: ${JSON.stringify([...held])}`)
    } finally {
      registry.close()
    }
  })
  const fdsBefore = openFdCount()
  let failure: unknown
  try {
    fc.assert(property, { numRuns: 100 })
  } catch (error) {
    failure = error
  }
  if (failure === undefined) t.pass(`${steps} steps: every interleaving kept status, leases, mappings, descriptors and log as the model says`)
  else t.fail((failure as Error).message)
  t.ok(deferredSeen > 100, `deferred unregisters were exercised (${deferredSeen})`)
  t.ok(leasesOutlivingUnregister > 10, `leases taken on regions waiting for unregister (${leasesOutlivingUnregister})`)
  t.equal(openFdCount(), fdsBefore, 'no descriptor left')
  t.same(shmMappings(), [], 'no mapping left')
})

t.test('a region leased by many holders and unregistered by many concurrent requests is unmapped once', async (t) => {
  const capture = new LogCapture()
  const app = await loggedApp(t, capture, new GroupBarrier())
  const keys = [makeObject(t, OBJECT_BYTES, 'held0'), makeObject(t, OBJECT_BYTES, 'held1')]
  const pattern = (index: number) => Uint8Array.from({ length: 64 }, (_, at) => (index * 31 + at) & 0xff)
  const REGIONS = 12
  for (let index = 0; index < REGIONS; index++) {
    writeObject(keys[index % 2], index * 64, pattern(index))
    app.systemSharedMemory.register(`held${index}`, { key: keys[index % 2], byteSize: OBJECT_BYTES })
  }
  const leases = Array.from({ length: REGIONS }, (_, index) =>
    Array.from({ length: 4 }, () => app.systemSharedMemory.acquire(`held${index}`, index * 64, 64)))
  const random = randomFrom(SEED + 1)
  capture.clear()

  // 300 unregister requests (one in ten of every region), while the leases are released in random order
  // between them: each release is its own task, run when a request picked at random is answered,
  // racing with the requests still in flight. No lease goes before the first answer, so that
  // request's unregister is deferred.
  const requests = Array.from({ length: 300 }, (_, index) => random() < 0.1
    ? app.inject({ method: 'POST', url: `${SYSTEM}/unregister` })
    : app.inject({ method: 'POST', url: `${SYSTEM}/region/held${index % REGIONS}/unregister` }))
  const order = leases.flatMap((held, region) => held.map((lease) => ({ lease, region }))).sort(() => random() - 0.5)
  const violations: string[] = []
  const releases = order.map(({ lease, region }) => requests[Math.floor(random() * requests.length)].then(() => {
    // Until its own release, a lease reads its full length and the client's bytes, whatever was unmapped since.
    if (lease.buffer.length !== 64 || Buffer.compare(lease.buffer, pattern(region)) !== 0) violations.push(`held${region}`)
    lease.release()
    lease.release()
  }))
  const answers = await Promise.all(requests)
  await Promise.all(releases)
  t.ok(answers.every((answer) => answer.statusCode === 200), 'every unregister answered 200')
  t.same(violations, [], 'no lease saw its memory go before its release')
  t.same(app.systemSharedMemory.status(), [], 'every region went with its last lease')
  const unregistered = capture.withMessage(UNREGISTERED).map((line) => line.region).sort()
  t.same(unregistered, Array.from({ length: REGIONS }, (_, index) => `held${index}`).sort(), 'one "unregistered" line per region')
  t.ok(capture.withMessage(DEFERRED).length > 0, 'unregisters were deferred')
  for (const key of keys) {
    t.same(mappingsOf(key), [], `${key}: unmapped`)
    t.equal(fdsOf(key), 0, `${key}: no descriptor`)
  }
  t.ok(leases.flat().every((lease) => lease.buffer.length === 0), 'released views read as empty once unmapped')
})

// ---------------------------------------------------------------------------------------------
// Threads: the addon's SIGBUS guard keeps one list of mappings for the whole process

/**
 * Run in a child process (a SIGBUS the guard misses ends it): worker threads map and unmap one
 * object at once, each keeping a few mappings; then the object is truncated to nothing and every
 * worker touches the last byte of each mapping it kept. Prints how many of those read zero.
 */
const WORKERS_SCRIPT = `
const { Worker } = require('node:worker_threads')
const { truncateSync } = require('node:fs')
const [key, path, size, workers, cycles, root, gypBuild] = process.argv.slice(1)
const worker = \`
  const { parentPort, workerData: { key, size, cycles, root, gypBuild } } = require('node:worker_threads')
  const addon = require(gypBuild)(root)
  const kept = []
  for (let cycle = 0; cycle < cycles; cycle++) {
    const handle = addon.map(key, 0, size)
    kept.push(addon.window(handle, 0, size))
    addon.release(handle)
    if (kept.length > 8) addon.unmap(kept.splice(cycle % kept.length, 1)[0])
  }
  parentPort.postMessage('ready')
  parentPort.once('message', () => {
    let zeros = 0
    for (const buffer of kept) zeros += new Uint8Array(buffer)[size - 1] === 0 ? 1 : 0
    for (const buffer of kept) addon.unmap(buffer)
    parentPort.postMessage(zeros)
  })
\`
const started = Array.from({ length: Number(workers) }, () =>
  new Worker(worker, { eval: true, workerData: { key, size: Number(size), cycles: Number(cycles), root, gypBuild } }))
let ready = 0
let zeros = 0
let answered = 0
for (const each of started) {
  each.on('message', (message) => {
    if (message === 'ready') {
      if (++ready < started.length) return
      truncateSync(path, 0)
      for (const other of started) other.postMessage('touch')
    } else {
      zeros += message
      if (++answered === started.length) console.log(zeros)
    }
  })
}
`

t.test('worker threads mapping and unmapping at once: every mapping stays guarded against SIGBUS', async (t) => {
  const WORKERS = 4
  const size = 4 * PAGE_SIZE
  const key = makeObject(t, size, 'threads')
  writeObject(key, 0, new Uint8Array(size).fill(7))
  const root = path.join(__dirname, '..')
  const child = spawnSync(process.execPath, ['-e', WORKERS_SCRIPT, key, objectPath(key), String(size), String(WORKERS), '100000',
    root, require.resolve('node-gyp-build')], { encoding: 'utf8', timeout: PATIENCE_MS })
  t.equal(child.error, undefined, 'the child finished (the bound only ends a child that hangs)')
  t.equal(child.signal, null, 'the process survived: no SIGBUS slipped past the guard', { stderr: child.stderr })
  t.equal(child.stdout.trim(), String(WORKERS * 8), 'every kept mapping read zero past the end: each one was still guarded')
})

// ---------------------------------------------------------------------------------------------
// Inferences racing with unregister-all and re-registration of the same names

const SLOT_BYTES = 128 // OUTPUT0 then OUTPUT1, 16 INT32 each
const MAX_INFERS = 4000
const OUTPUT_BYTES = MAX_INFERS * SLOT_BYTES
/** Rounds of unregister-all and re-registration. */
const ROUNDS = 12
/** Inferences holding both regions at their model when each round's unregister-all arrives. */
const HELD = 4

interface Generation { input: string, output: string, sum: number[], difference: number[] }

function makeGeneration (t: Test, index: number): Generation {
  const a = Array.from({ length: 16 }, (_, at) => (index + 1) * 1000 + at)
  const b = Array.from({ length: 16 }, (_, at) => (index + 1) * 10 + 2 * at)
  const input = makeObject(t, PAGE_SIZE, `infer_in${index}`)
  writeObject(input, 0, new Uint8Array(Int32Array.from([...a, ...b]).buffer))
  return {
    input,
    output: makeObject(t, OUTPUT_BYTES, `infer_out${index}`),
    sum: a.map((value, at) => value + b[at]),
    difference: a.map((value, at) => value - b[at])
  }
}

type InferSend = (method: 'GET' | 'POST', url: string, body?: string, slot?: number, signal?: AbortSignal) => Promise<Answer>

/**
 * The example service with two gates on its infer route: the door before a request resolves its
 * regions (a preHandler hook), the model after (beforeModel). Requests whose slot is in `aborts`
 * make their client leave once they hold their regions, and go on when the service sees it.
 */
interface RaceService {
  app: FastifyInstance
  door: Gate
  model: Gate
  aborts: Map<string, AbortController>
}

async function raceService (t: Test, capture: LogCapture, fastify: FastifyServerOptions = {}): Promise<RaceService> {
  const door = new Gate()
  const model = new Gate()
  const aborts = new Map<string, AbortController>()
  const app = await buildServer({
    fastify: { logger: { level: 'info', stream: capture.stream }, ...fastify },
    beforeModel: async (request, infer) => {
      const leaving = aborts.get(String(request.headers['x-slot']))
      if (leaving === undefined) return model.pass()
      leaving.abort()
      if (!infer.signal.aborted) await bounded(once(infer.signal, 'abort'), 'the service never saw its client leave')
    }
  })
  t.teardown(() => app.close())
  app.addHook('preHandler', async (request) => { if (request.url.endsWith('/infer')) await door.pass() })
  return { app, door, model, aborts }
}

async function inferRace (t: Test, { app, door, model, aborts }: RaceService, capture: LogCapture, send: InferSend, canAbort: boolean) {
  const generations = [makeGeneration(t, 0), makeGeneration(t, 1)]
  const registry = app.systemSharedMemory
  const alreadyInManager = (name: string) => JSON.stringify({ error: `shared memory region '${name}' already in manager` })
  let registered = 0
  let refusedWhileHeld = 0

  const registerGeneration = async (generation: Generation) => {
    for (const [name, key, byteSize] of [['input', generation.input, 128], ['output', generation.output, OUTPUT_BYTES]] as const) {
      const answer = await send('POST', `${SYSTEM}/region/${name}/register`, registerBody(key, byteSize))
      if (answer.statusCode !== 200) throw new Error(`register ${name}: ${answer.statusCode} ${answer.body}`)
      registered++
    }
  }

  await registerGeneration(generations[0])
  // An object, not a variable: the workers read it while the churn, in another task, changes it.
  const churn = { running: true }
  const churning = (async () => {
    try {
      for (let round = 1; round <= ROUNDS; round++) {
        model.close()
        await model.untilHeld(HELD, `round ${round}: ${HELD} inferences never held the regions`)
        const all = await send('POST', `${SYSTEM}/unregister`)
        if (all.statusCode !== 200) throw new Error(`unregister-all: ${all.statusCode} ${all.body}`)
        // The held inferences keep the regions, and their names: meanwhile new inferences still
        // resolve them (the door is open) while a re-registration is refused.
        const next = generations[round % 2]
        const early = await send('POST', `${SYSTEM}/region/input/register`, registerBody(next.input, 128))
        if (early.body !== alreadyInManager('input')) throw new Error(`round ${round}: register while held: ${early.statusCode} ${early.body}`)
        refusedWhileHeld++
        // No new inference resolves the old regions from here: they go with the last one that holds them.
        door.close()
        model.open()
        await whenEvent(registry, 'unregister', () => !registry.has('input') && !registry.has('output'),
          `round ${round}: the old regions stayed after their inferences ended`)
        // Inferences that come in while the new generation registers find no region, or half of it.
        door.open()
        await registerGeneration(next)
      }
    } finally {
      churn.running = false
      door.open()
      model.open()
    }
  })()

  interface Outcome { slot: number, answer?: Answer, aborted: boolean }
  const outcomes: Outcome[] = []
  let nextSlot = 0
  const worker = async () => {
    while (churn.running && nextSlot < MAX_INFERS) {
      const slot = nextSlot++
      const request = {
        inputs: [shmInput('INPUT0', 'INT32', [1, 16], 'input', 64, 0), shmInput('INPUT1', 'INT32', [1, 16], 'input', 64, 64)],
        outputs: [shmOutput('OUTPUT0', 'output', 64, slot * SLOT_BYTES), shmOutput('OUTPUT1', 'output', 64, slot * SLOT_BYTES + 64)]
      }
      const controller = new AbortController()
      const abort = canAbort && slot % 7 === 3
      if (abort) aborts.set(String(slot), controller)
      try {
        outcomes.push({ slot, answer: await send('POST', '/v2/models/simple/infer', JSON.stringify(request), slot, controller.signal), aborted: false })
      } catch (error) {
        if (!abort || (error as Error).name !== 'AbortError') throw error
        outcomes.push({ slot, aborted: true })
      } finally {
        aborts.delete(String(slot))
      }
    }
  }
  await Promise.all([churning, ...Array.from({ length: 8 }, worker)])

  // Every region is released once the last inference that held it is done.
  t.equal((await send('POST', `${SYSTEM}/unregister`)).statusCode, 200)
  await whenEvent(registry, 'unregister', () => registry.status().length === 0, 'regions stayed after every inference ended')
  t.pass('every region went once its inferences ended')

  const outputs = generations.map((generation) => readFileSync(objectPath(generation.output)))
  const results = generations.map((generation) => [...generation.sum, ...generation.difference])
  const slotOf = (bytes: Buffer, slot: number) => Array.from(new Int32Array(bytes.buffer.slice(bytes.byteOffset + slot * SLOT_BYTES,
    bytes.byteOffset + (slot + 1) * SLOT_BYTES)))
  const zero = new Array<number>(32).fill(0)
  const problems: string[] = []
  let served = 0
  let notFound = 0
  let aborted = 0
  const simpleResponse = '{"model_name":"simple","model_version":"1","outputs":[{"name":"OUTPUT0","datatype":"INT32","shape":[1,16]},' +
    '{"name":"OUTPUT1","datatype":"INT32","shape":[1,16]}]}'
  for (const outcome of outcomes) {
    const { slot, answer } = outcome
    const written = outputs.map((bytes) => slotOf(bytes, slot)).filter((values) => !sameStatus(values, zero))
    const whole = written.length === 1 && results.some((result) => sameStatus(result, written[0]))
    if (outcome.aborted) {
      aborted++
      if (written.length !== 0) problems.push(`slot ${slot} (aborted before its model ran): written ${JSON.stringify(written)}`)
    } else if (answer?.statusCode === 200 && answer.body === simpleResponse) {
      served++
      if (!whole) problems.push(`slot ${slot}: answered 200 but its results are ${JSON.stringify(written)}`)
    } else if (answer?.statusCode === 404 && /^\{"error":"Unable to find shared memory region: '(input|output)'"\}$/.test(answer.body)) {
      notFound++
      if (written.length !== 0) problems.push(`slot ${slot}: refused, yet written`)
    } else {
      problems.push(`slot ${slot}: ${answer?.statusCode} ${answer?.body}`)
    }
  }
  t.same(problems.slice(0, 10), [], `every inference (${outcomes.length}, seed ${SEED}) was served whole into the region it resolved, or refused`)
  t.ok(served >= ROUNDS * HELD, `${served} inferences served, at least the ${HELD} held in each round (${notFound} found a name unregistered, ${aborted} aborted)`)
  if (canAbort) t.ok(aborted > 0, `${aborted} clients left while their inference held its regions`)
  t.ok(capture.withMessage(DEFERRED).length >= ROUNDS, 'each unregister-all was deferred by the inferences holding the regions')
  t.equal(refusedWhileHeld, ROUNDS, 'each round, re-registration was refused while the old regions were held')

  t.equal(capture.withMessage(REGISTERED).length, registered, 'one "registered" line per successful register')
  unmappedOnce(t, capture.lines)
  t.same(capture.lines.filter((line) => line.level >= LEVEL.error).map((line) => line.msg), [], 'nothing logged as an error')
  for (const generation of generations) {
    t.same(mappingsOf(generation.input), [], 'input unmapped')
    t.same(mappingsOf(generation.output), [], 'output unmapped')
    t.equal(fdsOf(generation.input) + fdsOf(generation.output), 0, 'no descriptor left')
  }
}

t.test('inferences race with unregister-all and re-register (example service, app.inject)', async (t) => {
  const capture = new LogCapture()
  const service = await raceService(t, capture)
  await service.app.ready()
  await inferRace(t, service, capture, async (method, url, payload, slot) => {
    const response = await service.app.inject({ method, url, payload, headers: { 'x-slot': String(slot) } })
    return { statusCode: response.statusCode, body: response.body }
  }, false)
})

t.test('inferences race with unregister-all and re-register (example service, real socket, aborting clients)', async (t) => {
  const capture = new LogCapture()
  // An aborted fetch may leave the client a connection that never sent a request; the server
  // would wait for it to time out before it closes.
  const service = await raceService(t, capture, { forceCloseConnections: true })
  await service.app.listen({ host: '127.0.0.1', port: 0 })
  const { port } = service.app.server.address() as { port: number }
  await inferRace(t, service, capture, async (method, url, body, slot, signal) => {
    const response = await fetch(`http://127.0.0.1:${port}${url}`, { method, body, signal, headers: { 'x-slot': String(slot) } })
    return { statusCode: response.status, body: await response.text() }
  }, true)
})
