/**
 * Soak: thousands of register/unregister cycles, over HTTP (with inferences) and programmatically,
 * with and without leases, deferred unregisters and failing registrations, bring the process back
 * to where it started: as many file descriptors, the same /dev/shm mappings in /proc/self/maps,
 * as much memory in buffers, and resident memory within a bound. Each lease writes its whole
 * region, so a mapping that was never unmapped would also keep its touched pages resident. And
 * dozens of stops under load: apps sharing a registry closed while inferences run, each leaving
 * nothing behind (test/helpers/stops.ts).
 */
import { getHeapStatistics } from 'node:v8'
import type { FastifyInstance } from 'fastify'
import t from 'tap'
import { Registry } from '../lib/registry/registry'
import type { Lease } from '../types'
import { registerBody, SYSTEM } from './helpers/app'
import {
  buildInferApp, echoModel, infer, makeMappedObject, type MappedObject, registerRegion, shmInput, shmOutput, sumModel
} from './helpers/kserve'
import { collectGarbage, residentBytes, residentSharedBytes } from './helpers/observe'
import { makeObject, openFdCount, PAGE_SIZE, shmMappings, uniqueKey } from './helpers/shm'
import { stopUnderLoad } from './helpers/stops'
import { listenLocally, stalledInfer, untilNoConnections } from './helpers/slow-client'

const CYCLES = 3000
/** Enough for Fastify, light-my-request, the JIT and the allocators to reach their steady state. */
const WARM_UP = 1500
/**
 * A full collection this often. Left to itself, V8 lets its heap grow by hundreds of MiB between
 * collections, and since Node 24 it keeps the pages it frees resident for reuse (measured): then
 * resident memory says where the heap peaked, not what leaked. Collected this often, the heap peaks
 * alike in the warm-up and in the soak, and a leak is all that can make memory grow.
 */
const COLLECT_EVERY = 250
const OBJECT_BYTES = 16 * PAGE_SIZE
const MiB = 1024 * 1024
/** Resident memory, V8's heap included: measured 0 to 3 MiB of growth over this soak on Node 20 to 26. */
const RSS_GROWTH_LIMIT = 16 * MiB
/** Resident memory that is not V8's heap: measured 0 to 1 MiB of growth. */
const OUTSIDE_HEAP_GROWTH_LIMIT = 8 * MiB
/**
 * Buffers and ArrayBuffers, our views over mappings included: measured no growth at all. The
 * precise check: a planted leak of 2 KiB a cycle made 5.9 MiB here, and no resident bound saw it.
 */
const BUFFER_GROWTH_LIMIT = 1 * MiB

/** Where a process's resources stand, to compare before and after. */
function snapshot () {
  collectGarbage()
  return {
    fds: openFdCount(),
    mappings: shmMappings(),
    rss: residentBytes(),
    shmem: residentSharedBytes(),
    /** The part of VmRSS that is V8's heap. */
    heap: getHeapStatistics().total_physical_size,
    /** Memory of every live Buffer and ArrayBuffer, as V8 counts it (not all resident). */
    buffers: process.memoryUsage().external
  }
}

/** A cycle's region: the offset is mostly not page-aligned, the size varies. */
function regionOf (cycle: number) {
  const offset = (cycle * 97) % (2 * PAGE_SIZE)
  const byteSize = 1 + (cycle * 7919) % (OBJECT_BYTES - offset - 1)
  return { offset, byteSize }
}

/** Fills a lease's whole view, as a model writing an output would (so its pages become resident). */
function touch (lease: Lease, cycle: number): void {
  lease.buffer.fill(cycle & 0xff)
}

interface HttpSoak {
  app: FastifyInstance
  /** The infer requests the test route keeps; emptied as the soak goes, as it is not the server's. */
  seen: unknown[]
  keys: string[]
  /** The client's objects for the inferences, mapped on its side before any measurement. */
  input: MappedObject
  output: MappedObject
}

async function httpSoak ({ app, seen, keys, input, output }: HttpSoak, cycles: number): Promise<string[]> {
  const problems: string[] = []
  const registry = app.systemSharedMemory
  output.bytes.fill(0)
  const inferRequest = {
    inputs: [shmInput('INPUT0', 'INT32', [1, 16], 'in', 64, 0), shmInput('INPUT1', 'INT32', [1, 16], 'in', 64, 64)],
    outputs: [shmOutput('OUTPUT0', 'out', 64, 0), shmOutput('OUTPUT1', 'out', 64, 64)]
  }
  const post = (url: string, payload?: string) => app.inject({ method: 'POST', url: `${SYSTEM}${url}`, payload })

  for (let cycle = 0; cycle < cycles; cycle++) {
    if (cycle % COLLECT_EVERY === 0) collectGarbage()
    const name = `soak_${cycle % 8}`
    const { offset, byteSize } = regionOf(cycle)
    const registered = await post(`/region/${name}/register`, registerBody(keys[cycle % keys.length], byteSize, offset))
    if (registered.statusCode !== 200) problems.push(`cycle ${cycle}: register answered ${registered.statusCode} ${registered.body}`)
    const leases: Lease[] = []
    switch (cycle % 5) {
      case 0: // no lease
        break
      case 1: { // a lease released before the unregister
        const lease = registry.acquire(name, 0, byteSize)
        touch(lease, cycle)
        lease.release()
        break
      }
      case 2: // a lease that outlives the unregister: deferred
      case 3: // two leases and unregister-all: deferred, released in turn
        for (let use = 0; use < cycle % 5 - 1; use++) {
          leases.push(registry.acquire(name, 0, byteSize))
          touch(leases[use], cycle)
        }
        break
      case 4: { // an inference over two more regions, whose leases end with its response
        await post('/region/in/register', registerBody(input.key, 128))
        await post('/region/out/register', registerBody(output.key, 128))
        const response = await infer(app, 'simple', inferRequest)
        seen.length = 0
        if (response.statusCode !== 200) problems.push(`cycle ${cycle}: infer answered ${response.statusCode} ${response.body}`)
        await post('/unregister')
        if (registry.has('in') || registry.has('out')) problems.push(`cycle ${cycle}: the inference kept its regions after its response`)
      }
    }
    const unregistered = cycle % 5 === 3 ? await post('/unregister') : await post(`/region/${name}/unregister`)
    if (unregistered.statusCode !== 200) problems.push(`cycle ${cycle}: unregister answered ${unregistered.statusCode}`)
    if (leases.length > 0 && !registry.has(name)) problems.push(`cycle ${cycle}: a leased region left before its leases`)
    for (const lease of leases) {
      if (lease.buffer.length !== byteSize || lease.buffer[byteSize - 1] !== (cycle & 0xff)) problems.push(`cycle ${cycle}: a lease lost its bytes`)
      lease.release()
    }
    if (registry.has(name)) problems.push(`cycle ${cycle}: '${name}' stayed after its unregister and leases`)
  }
  const expected = Array.from({ length: 16 }, (_, index) => [index + index + 16, index - index - 16]).flat()
  const view = new Int32Array(output.bytes.buffer, output.bytes.byteOffset, 32)
  const got = Array.from({ length: 16 }, (_, index) => [view[index], view[16 + index]]).flat()
  if (cycles >= 5 && JSON.stringify(got) !== JSON.stringify(expected)) problems.push(`the inferences wrote ${JSON.stringify(got)}`)
  return problems
}

function programmaticSoak (keys: string[], cycles: number): string[] {
  const problems: string[] = []
  const registry = new Registry()
  const missing = uniqueKey('soak_missing')
  try {
    for (let cycle = 0; cycle < cycles; cycle++) {
      if (cycle % COLLECT_EVERY === 0) collectGarbage()
      const name = `direct_${cycle % 3}`
      const { offset, byteSize } = regionOf(cycle)
      registry.register(name, { key: keys[cycle % keys.length], offset, byteSize })
      // Leases of every pattern: none, released before, outliving the unregister (one to four).
      const leases: Lease[] = []
      for (let use = 0; use < cycle % 5; use++) {
        const lease = registry.acquire(name, use, byteSize - use)
        touch(lease, cycle)
        leases.push(lease)
      }
      if (cycle % 7 === 0) leases.splice(0).forEach((lease) => lease.release())
      if (cycle % 11 === 0) registry.unregisterAll()
      else registry.unregister(name)
      registry.unregister(name) // again: a second unregister of a pending region changes nothing
      if (registry.has(name) !== (leases.length > 0)) problems.push(`cycle ${cycle}: '${name}' listed ${registry.has(name)} with ${leases.length} leases`)
      // Released in reverse order, each twice: the last real release unmaps, the repeats do nothing.
      for (const lease of leases.reverse()) {
        lease.release()
        lease.release()
      }
      if (registry.has(name)) problems.push(`cycle ${cycle}: '${name}' stayed after its last lease`)
      if (leases.some((lease) => lease.buffer.length !== 0)) problems.push(`cycle ${cycle}: a view still reads an unmapped region`)

      // Failing registrations open nothing that stays open.
      if (cycle % 10 === 0) {
        for (const source of [{ key: missing, byteSize: 1 }, { key: keys[0], offset: OBJECT_BYTES, byteSize: 1 },
          { key: keys[0], byteSize: OBJECT_BYTES + 1 }, { key: keys[0], byteSize: 0 }]) {
          try {
            registry.register('refused', source)
            problems.push(`cycle ${cycle}: registered ${JSON.stringify(source)}`)
          } catch {
            // expected
          }
        }
      }
    }
  } finally {
    registry.close()
  }
  return problems
}

t.test(`${CYCLES} cycles over HTTP and ${CYCLES} programmatic: descriptors, mappings and memory come back`, async (t) => {
  const keys = [0, 1, 2, 3].map((index) => makeObject(t, OBJECT_BYTES, `soak${index}`))
  const { app, seen } = await buildInferApp(t, [sumModel('simple')])
  const input = makeMappedObject(t, 128, 'soak_in')
  const output = makeMappedObject(t, 128, 'soak_out')
  new Int32Array(input.bytes.buffer, input.bytes.byteOffset, 32).set(Array.from({ length: 32 }, (_, index) => index))
  const soak = { app, seen, keys, input, output }

  // Warm-up: Fastify, light-my-request, the JIT and the allocator reach their steady state.
  t.same(await httpSoak(soak, WARM_UP), [], 'warm-up over HTTP')
  t.same(programmaticSoak(keys, WARM_UP), [], 'warm-up, programmatic')

  const before = snapshot()
  const httpProblems = await httpSoak(soak, CYCLES)
  t.same(httpProblems.slice(0, 10), [], `${CYCLES} cycles over HTTP, each as expected`)
  const afterHttp = snapshot()
  t.equal(afterHttp.fds, before.fds, 'over HTTP: as many descriptors as before')
  t.same(afterHttp.mappings, before.mappings, 'over HTTP: the same /dev/shm mappings as before')

  t.same(programmaticSoak(keys, CYCLES).slice(0, 10), [], `${CYCLES} programmatic cycles, each as expected`)
  const after = snapshot()
  t.equal(after.fds, before.fds, 'programmatic: as many descriptors as before')
  t.same(after.mappings, before.mappings, 'programmatic: the same /dev/shm mappings as before')
  t.equal(after.shmem, before.shmem, 'resident shared memory (RssShmem) back to what it was: no touched page is still mapped')
  const growth = after.rss - before.rss
  const outsideHeap = growth - (after.heap - before.heap)
  const mib = (bytes: number) => `${(bytes / MiB).toFixed(1)} MiB`
  t.ok(after.buffers - before.buffers < BUFFER_GROWTH_LIMIT,
    `memory in buffers grew ${mib(after.buffers - before.buffers)} (limit ${mib(BUFFER_GROWTH_LIMIT)})`)
  t.ok(growth < RSS_GROWTH_LIMIT, `resident memory grew ${mib(growth)} (limit ${mib(RSS_GROWTH_LIMIT)})`)
  t.ok(outsideHeap < OUTSIDE_HEAP_GROWTH_LIMIT,
    `resident memory outside V8's heap grew ${mib(outsideHeap)} (limit ${mib(OUTSIDE_HEAP_GROWTH_LIMIT)})`)
})

t.test('while regions are registered, each holds one mapping and one descriptor; all go back', async (t) => {
  const keys = [0, 1].map((index) => makeObject(t, OBJECT_BYTES, `held${index}`))
  const before = snapshot()
  const registry = new Registry()
  t.teardown(() => registry.close())
  const REGIONS = 200
  for (let index = 0; index < REGIONS; index++) {
    registry.register(`r${index}`, { key: keys[index % 2], offset: 0, byteSize: OBJECT_BYTES })
  }
  const leases = Array.from({ length: REGIONS }, (_, index) => registry.acquire(`r${index}`, 0, OBJECT_BYTES))
  leases.forEach((lease, index) => touch(lease, index))
  const held = snapshot()
  t.equal(held.fds - before.fds, REGIONS, `${REGIONS} regions: ${REGIONS} more descriptors`)
  t.equal(held.mappings.length - before.mappings.length, REGIONS, `${REGIONS} regions: ${REGIONS} more mappings`)
  // RssShmem, unlike VmRSS, moves with nothing but shared memory mappings: exact, whatever the heap does.
  t.equal(held.shmem - before.shmem, REGIONS * OBJECT_BYTES, 'RssShmem counts every touched page of every mapping')

  registry.unregisterAll()
  t.equal(registry.status().length, REGIONS, 'deferred while leased')
  for (const lease of leases) lease.release()
  const after = snapshot()
  t.same(registry.status(), [])
  t.equal(after.fds, before.fds, 'descriptors back to where they were')
  t.same(after.mappings, before.mappings, 'mappings back to where they were')
  t.equal(after.shmem, before.shmem, 'RssShmem back to where it was')
})

t.test('regions past 4 GiB, cycled with leases anywhere in them: descriptors, mappings and touched pages come back', async (t) => {
  const CYCLES_PAST_4_GIB = 300
  const byteSize = 4 * 1024 ** 3 + 3 * PAGE_SIZE // sparse: only the pages leases touch cost memory
  const key = makeObject(t, byteSize, 'soak_past4g')
  const registry = new Registry()
  t.teardown(() => registry.close())
  const before = snapshot()
  let wrong = 0
  for (let cycle = 0; cycle < CYCLES_PAST_4_GIB; cycle++) {
    registry.register('big', { key, offset: cycle % PAGE_SIZE, byteSize: byteSize - PAGE_SIZE })
    const at = cycle % 2 === 0 ? 2 ** 32 + cycle : cycle * PAGE_SIZE
    const leases = [registry.acquire('big', at, PAGE_SIZE), registry.acquire('big', at, 8)]
    touch(leases[0], cycle)
    if (leases[1].buffer[7] !== (cycle & 0xff)) wrong++
    registry.unregister('big') // deferred: the leases are live
    for (const lease of leases) lease.release()
    if (registry.has('big') || leases[0].buffer.length !== 0) wrong++
  }
  t.equal(wrong, 0, `${CYCLES_PAST_4_GIB} cycles: every lease saw its bytes, and every region went with its last lease`)
  const after = snapshot()
  t.equal(after.fds, before.fds, 'as many descriptors as before')
  t.same(after.mappings, before.mappings, 'the same /dev/shm mappings as before')
  t.equal(after.shmem, before.shmem, 'RssShmem back to where it was')
})

t.test('stops under load, cycled: apps sharing a registry closed with inferences in flight, every time answered and clean', async (t) => {
  const STOPS = 60
  const input = makeMappedObject(t, 128, 'soak_stops')
  new Int32Array(input.bytes.buffer, input.bytes.byteOffset, 32).set([...Array(16).keys(), ...Array(16).fill(1)])
  const cycle = (index: number) => {
    const apps = 1 + index % 3
    // Each order of closing in turn: the first app first, the last first, and so on.
    const closeOrder = Array.from({ length: apps }, (_, position) => (position + index) % apps)
    return stopUnderLoad({ apps, inFlight: 1 + index % 4, closeOrder, unregisterFirst: index % 2 === 1, releaseAfter: index % (apps + 1) }, input.key)
  }
  for (let index = 0; index < 10; index++) t.same(await cycle(index), [], `warm-up stop ${index}`)
  const before = snapshot()
  const problems: string[] = []
  for (let index = 0; index < STOPS; index++) problems.push(...(await cycle(index)).map((problem) => `stop ${index}: ${problem}`))
  t.same(problems.slice(0, 10), [], `${STOPS} stops, each answered every inference in flight and left nothing`)
  const after = snapshot()
  t.equal(after.fds, before.fds, 'as many descriptors as before')
  t.same(after.mappings, before.mappings, 'the same /dev/shm mappings as before')
})

t.test('slow readers, round after round: their regions unregister at once, they are dropped, and everything comes back', async (t) => {
  const byteSize = 32 * MiB // past what the sockets' buffers take while the client does not read
  const readers = 3
  const { app, seen } = await buildInferApp(t, [echoModel('m', ['UINT8'])], { limits: { sendTimeoutMs: 200 } })
  const port = await listenLocally(t, app)
  const object = makeMappedObject(t, byteSize, 'soak_slow')
  const body = {
    inputs: [shmInput('IN_UINT8', 'UINT8', [byteSize], 'in', byteSize)],
    outputs: [{ name: 'OUT_UINT8', parameters: { binary_data: true } }]
  }
  const problems: string[] = []
  const round = async (index: number) => {
    await registerRegion(t, app, 'in', object.key, byteSize)
    const stalled = await Promise.all(Array.from({ length: readers }, () => stalledInfer(t, port, 'm', body)))
    app.systemSharedMemory.unregister('in')
    if (app.systemSharedMemory.status().length !== 0) problems.push(`round ${index}: the region outlived its unregister`)
    await untilNoConnections(app)
    for (const { socket } of stalled) socket.destroy()
    seen.length = 0 // the test route's record, not the server's
  }
  for (let index = 0; index < 3; index++) await round(index)
  const before = snapshot()
  for (let index = 0; index < 20; index++) await round(index)
  const after = snapshot()
  t.same(problems, [], 'every unregister completed while its readers were stalled')
  t.equal(after.fds, before.fds, 'as many descriptors as before')
  t.same(after.mappings, before.mappings, 'the same /dev/shm mappings as before')
  t.ok(after.buffers - before.buffers < BUFFER_GROWTH_LIMIT,
    `memory in buffers grew ${((after.buffers - before.buffers) / MiB).toFixed(1)} MiB (limit ${BUFFER_GROWTH_LIMIT / MiB} MiB)`)
})
