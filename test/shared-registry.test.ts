/**
 * One registry for every user of a store (`sharedRegistry`): Triton's rules hold across them, each
 * maps regions on its own, and a failing store changes nothing. Here the users are registries in
 * this process; test/shared-registry-processes.test.ts has them in separate processes.
 */
import { spawn } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, truncateSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { once } from 'node:events'
import Database from 'better-sqlite3'
import Fastify from 'fastify'
import t, { type Test } from 'tap'
import { LeaseTable, PROCESS_SLOTS } from '../lib/store/lease-table'
import { SqliteStore } from '../lib/store/sqlite-store'
import { processStartTime } from '../lib/store/process-identity'
import { optionalPeer } from '../lib/util/optional-peer'
import fastifyTritonShm from '../lib'
import { Registry } from '../lib/registry/registry'
import type { RegistryOptions, SharedMemoryRegionStatus, SystemSharedMemoryRegistry } from '../types'
import { buildApp, registerBody, SYSTEM } from './helpers/app'
import { assertError } from './helpers/http'
import { LogCapture } from './helpers/observe'
import { storePath } from './helpers/registry-peer'
import { makeObject, mappingsOf, PAGE_SIZE, shmMappings, writeObjectFile } from './helpers/shm'
import { createObject, MappedRange, unlinkObject } from '../lib/addon/posix-shm'
import { bounded, PATIENCE_MS, whenEvent } from './helpers/sync'
import { startCommandChild } from './helpers/command-child'

/** A registry on the store at `store`, closed when the test ends. */
function user (t: Test, store: string, options: RegistryOptions = {}): Registry {
  const registry = new Registry({ ...options, sharedRegistry: { path: store, checkIntervalMs: 50, ...options.sharedRegistry } })
  t.teardown(() => registry.close())
  return registry
}

/** A connection of its own to the store, as another program (or a crashed process) writes it. */
function connect (t: Test, store: string): Database.Database {
  const connection = new Database(store)
  t.teardown(() => connection.close())
  return connection
}

/** Two users of one new store, and an object of one page. */
function twoUsers (t: Test, label: string): { a: Registry, b: Registry, key: string } {
  const store = storePath(t)
  return { a: user(t, store), b: user(t, store), key: makeObject(t, PAGE_SIZE, label) }
}

const STORE_WRITER = path.join(__dirname, 'fixtures', 'store-writer.ts')

const names = (registry: SystemSharedMemoryRegistry) => registry.status().map((region) => region.name)

t.test('one truth: every user sees every change at its next call', async (t) => {
  const { a, b, key } = twoUsers(t, 'truth')
  writeObjectFile(key, 0, [1, 2, 3, 4])

  a.register('z', { key, byteSize: 8 })
  a.register('y', { key, offset: 2, byteSize: 2 })
  t.ok(b.has('z'), 'a registration is seen by the other user at once')
  t.same(b.status(), a.status(), 'the same status, sorted by name')
  t.same(names(b), ['y', 'z'])
  t.same(b.status('y'), [{ name: 'y', key, offset: 2, byte_size: 2 }])
  const lease = b.acquire('y', 0, 2)
  t.same([...lease.buffer], [3, 4], 'and it serves the region from its own mapping')
  lease.release()

  b.unregister('z')
  t.notOk(a.has('z'), 'an unregister is seen by the other user at once')
  t.throws(() => a.acquire('z', 0, 1), { kind: 'not-found', message: "Unable to find shared memory region: 'z'" })
  b.unregisterAll()
  t.same(a.status(), [])
  t.same(mappingsOf(key), [], 'neither user keeps a mapping of what is gone')
})

t.test('names are unique across users, and every message is the single-process one', async (t) => {
  const { a, b, key } = twoUsers(t, 'unique')
  a.register('r', { key, byteSize: 8 })
  t.throws(() => b.register('r', { key, byteSize: 8 }), { kind: 'exists', message: "shared memory region 'r' already in manager" })
  t.throws(() => b.register('s', { key, byteSize: PAGE_SIZE + 1 }),
    { kind: 'invalid', message: "failed to register shared memory region 's': invalid args" })
  t.throws(() => b.register('s', { key: '/fts-no-such-object', byteSize: 8 }),
    { kind: 'unusable', message: "Unable to open shared memory region: '/fts-no-such-object'" })
  t.same(names(a), ['r'], 'refusals change nothing')
  t.equal(mappingsOf(key).length, 1, 'only the registering user has mapped it')
})

t.test('a name registered again is a new registration: never served from the old mapping', async (t) => {
  const store = storePath(t)
  const [a, b] = [user(t, store), user(t, store)]
  const first = makeObject(t, PAGE_SIZE, 'first')
  const second = makeObject(t, PAGE_SIZE, 'second')
  writeObjectFile(first, 0, [1, 1, 1, 1])
  writeObjectFile(second, 0, [2, 2, 2, 2])
  a.register('r', { key: first, byteSize: 64 })
  b.acquire('r', 0, 4).release()
  t.equal(mappingsOf(first).length, 2, 'both users have mapped the first object')

  a.unregister('r')
  a.register('r', { key: second, offset: 1, byteSize: 3 })
  const lease = b.acquire('r', 0, 3)
  t.same([...lease.buffer], [2, 2, 2], 'the other user reads the new object')
  t.same(mappingsOf(first), [], 'and has unmapped the old one')
  t.throws(() => b.acquire('r', 0, 4), { message: "Invalid offset + byte size for shared memory region: 'r'" }, 'the new size holds')
  lease.release()
})

t.test('deferred unregister: a lease in any user keeps the region, and its end removes it everywhere', async (t) => {
  const { a, b, key } = twoUsers(t, 'deferred')
  writeObjectFile(key, 0, [7])
  a.register('r', { key, byteSize: 8 })
  const lease = b.acquire('r', 0, 1)

  a.unregister('r')
  t.same(names(a), ['r'], 'still listed where it was unregistered')
  t.throws(() => a.register('r', { key, byteSize: 8 }), { message: "shared memory region 'r' already in manager" }, 'and blocks its name')
  t.equal(a.counters().deferredUnregisters, 1)
  const second = b.acquire('r', 0, 1)
  t.same([...second.buffer], [7], 'and usable')
  a.unregister('r')
  t.same(names(b), ['r'], 'a second unregister while leased changes nothing')

  lease.release()
  t.same(names(a), ['r'], 'one of two leases ended')
  second.release()
  t.same(names(a), [], 'the last lease ended: gone, without another unregister')
  t.same(names(b), [])
  t.same(mappingsOf(key), [])
  a.register('r', { key, byteSize: 8 })
  t.ok(b.has('r'), 'the name is free again')
})

t.test('a lease in the unregistering user itself defers too', async (t) => {
  const { a, b, key } = twoUsers(t, 'own')
  a.register('r', { key, byteSize: 8 })
  const lease = a.acquire('r', 0, 1)
  b.unregister('r')
  t.ok(a.has('r'))
  lease.release()
  t.notOk(b.has('r'))
})

t.test('a region removed while a user was about to take its first lease is not leased', async (t) => {
  const { a, b, key } = twoUsers(t, 'vanishing')
  a.register('r', { key, byteSize: 8 })
  // b notices the registration inside acquire; its listener unregisters it through a, in between.
  b.once('register', () => a.unregister('r'))
  t.throws(() => b.acquire('r', 0, 1), { message: "Unable to find shared memory region: 'r'" })
  t.notOk(b.has('r'))
  t.same(mappingsOf(key), [], 'the mapping made for the lease went with it')
})

t.test('another object under the registered key is refused by a user that never mapped the registered one', async (t) => {
  const { a, b, key } = twoUsers(t, 'recreated')
  a.register('r', { key, byteSize: 8 })
  writeObjectFile(key, 0, [1])
  unlinkObject(key)
  createObject(key, PAGE_SIZE)
  writeObjectFile(key, 0, [2])
  const lease = a.acquire('r', 0, 1)
  t.same([...lease.buffer], [1], 'the registering user serves the registered object')
  lease.release()
  t.throws(() => b.acquire('r', 0, 1), { code: 'ERR_SHM_REGION_UNAVAILABLE' }, 'the other refuses the new one')
  // The registering user's mapping is of the removed object, `(deleted)`.
  t.same(mappingsOf(key).filter((line) => !line.endsWith('(deleted)')), [], 'and no mapping of the new one is kept')
  t.throws(() => b.acquire('r', 0, 1), { code: 'ERR_SHM_REGION_UNAVAILABLE' }, 'every time')
})

t.test('a store made before records named their object: upgraded, and a record without one is served by no later mapping', async (t) => {
  const store = storePath(t)
  const old = new Database(store)
  old.exec(`CREATE TABLE regions (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL UNIQUE, key TEXT NOT NULL,
    offset INTEGER NOT NULL, byte_size INTEGER NOT NULL, unregister_pending INTEGER NOT NULL DEFAULT 0, slot INTEGER NOT NULL UNIQUE)`)
  old.close()
  const [a, b] = [user(t, store), user(t, store)]
  const key = makeObject(t, PAGE_SIZE, 'upgraded')
  a.register('r', { key, byteSize: 8 })
  t.doesNotThrow(() => b.acquire('r', 0, 1).release(), 'the other user maps and serves the registered object')
  // As an earlier version, still running beside these, writes a registration.
  connect(t, store).prepare("INSERT INTO regions (name, key, offset, byte_size, slot) VALUES ('earlier', ?, 0, 8, 100)").run(key)
  a.register('s', { key, byteSize: 8 })
  t.throws(() => b.acquire('earlier', 0, 1), { code: 'ERR_SHM_REGION_UNAVAILABLE' })
})

t.test('an object the client removed after registering cannot be opened by a user that never mapped it', async (t) => {
  const { a, b, key } = twoUsers(t, 'removed')
  a.register('r', { key, byteSize: 8 })
  unlinkObject(key)
  t.doesNotThrow(() => a.acquire('r', 0, 1).release(), 'the registering user still has it mapped')
  t.throws(() => b.acquire('r', 0, 1), {
    code: 'ERR_SHM_REGION_UNAVAILABLE',
    message: "shared memory region 'r' cannot be opened by this server process: its object was removed, replaced or shrunk after it was registered. Unregister it, and register it again"
  })
  b.unregister('r')
  t.notOk(a.has('r'))
})

/** The store as another program sees it, and a process that is gone as a crash leaves it: its
 * user row, and a lease counted in the lease table on each region registered now. */
function deadHolder (t: Test, store: string): { raw: Database.Database, userId: number } {
  const raw = connect(t, store)
  const slot = PROCESS_SLOTS - 1
  const userId = Number(raw.prepare('INSERT INTO users (pid, start_time, slot) VALUES (?, 1, ?)').run(2 ** 22 + 1, slot).lastInsertRowid)
  const table = new LeaseTable(`${store}-leases`, false)
  for (const regionSlot of raw.prepare('SELECT slot FROM regions').pluck().all() as number[]) table.setHolding(slot, regionSlot, true)
  table.close()
  return { raw, userId }
}

t.test('leases of a process that is gone do not hold a region', async (t) => {
  const store = storePath(t)
  const a = user(t, store)
  const key = makeObject(t, PAGE_SIZE, 'gone')
  a.register('r', { key, byteSize: 8 })
  const { raw, userId } = deadHolder(t, store)
  a.unregister('r')
  t.notOk(a.has('r'), 'the unregister is not deferred for a dead holder')
  t.equal(raw.prepare('SELECT count(*) FROM users WHERE id = ?').pluck().get(userId), 0, 'the dead user is forgotten')

  // A deferred unregister whose last holder died before letting go: the name is free again.
  a.register('r', { key, byteSize: 8 })
  deadHolder(t, store).raw.exec('UPDATE regions SET unregister_pending = 1')
  await whenEvent(a, 'unregister', () => !a.has('r'), 'a check completing the unregister')
  a.register('r', { key, byteSize: 16 })
  t.same(a.status('r'), [{ name: 'r', key, offset: 0, byte_size: 16 }], 'registered anew')
})

t.test('a store whose lease table is gone (the machine restarted) starts anew', async (t) => {
  const store = storePath(t)
  const key = makeObject(t, PAGE_SIZE, 'rebooted')
  user(t, store).register('r', { key, byteSize: 8 })
  const raw = connect(t, store)
  // As a restart leaves a store on a disk: the file's rows, without the processes or the lease table.
  raw.exec('DELETE FROM users')
  rmSync(`${store}-leases`)
  const fresh = user(t, store)
  t.same(fresh.status(), [], 'an empty registry')
  fresh.register('r', { key, byteSize: 8 })
  t.ok(fresh.has('r'))
})

t.test('at most PROCESS_SLOTS processes share a registry', async (t) => {
  const store = storePath(t)
  user(t, store)
  const raw = connect(t, store)
  const live = raw.prepare('INSERT INTO users (pid, start_time, slot) VALUES (?, ?, ?)')
  const startTime = processStartTime(process.pid)
  for (let slot = 1; slot < PROCESS_SLOTS; slot++) live.run(process.pid, startTime, slot)
  t.throws(() => new Registry({ sharedRegistry: { path: store } }), { message: /at most 128 processes can share a registry/ })
})

t.test('a change committed without its announcement (its writer died) is noticed within checkIntervalMs', async (t) => {
  const store = storePath(t)
  const a = user(t, store)
  const key = makeObject(t, PAGE_SIZE, 'unannounced')
  const raw = connect(t, store)
  t.same(a.status(), [])
  // As a registering process writes it: with the object its mapping found.
  const mapping = new MappedRange(key, 0, 8)
  mapping.unmap()
  raw.prepare("INSERT INTO regions (name, key, offset, byte_size, object, slot) VALUES ('r', ?, 0, 8, ?, 0)").run(key, mapping.object)
  await whenEvent(a, 'register', () => a.has('r'), 'the registration being noticed')
  t.same(a.acquire('r', 0, 8).buffer.length, 8)
})

t.test('a registration the store refuses after mapping leaves no mapping behind', async (t) => {
  const store = storePath(t)
  const a = user(t, store)
  const key = makeObject(t, PAGE_SIZE, 'refused')
  const raw = connect(t, store)
  raw.exec("CREATE TRIGGER refuse BEFORE INSERT ON regions BEGIN SELECT RAISE(ABORT, 'refused'); END")
  t.throws(() => a.register('r', { key, byteSize: 8 }), { kind: 'internal', code: 'ERR_SHM_STORE_FAILED' })
  t.same(mappingsOf(key), [])
  raw.exec('DROP TRIGGER refuse')
  a.register('r', { key, byteSize: 8 })
  t.ok(a.has('r'))
})

t.test('limits count every user\'s registrations', async (t) => {
  const store = storePath(t)
  const limits = { maxRegions: 2, maxTotalBytes: 100 }
  const [a, b] = [user(t, store, { limits }), user(t, store, { limits })]
  const key = makeObject(t, PAGE_SIZE, 'limits')
  a.register('a', { key, byteSize: 60 })
  t.throws(() => b.register('b', { key, byteSize: 41 }), { code: 'ERR_SHM_TOTAL_TOO_LARGE' })
  b.register('b', { key, byteSize: 40 })
  t.throws(() => a.register('c', { key, byteSize: 1 }), { code: 'ERR_SHM_TOO_MANY_REGIONS' })
  t.same(b.counters(), { regions: 2, bytesMapped: 100, liveLeases: 0, deferredUnregisters: 0, rejections: { ERR_SHM_TOTAL_TOO_LARGE: 1 } })
})

t.test('events: a user announces the others\' changes when it notices them, idle or not', async (t) => {
  const { a, b, key } = twoUsers(t, 'events')
  const seen: string[] = []
  b.on('register', (region: SharedMemoryRegionStatus) => seen.push(`+${region.name}`))
  b.on('unregister', (region: SharedMemoryRegionStatus) => seen.push(`-${region.name}`))

  a.register('r', { key, byteSize: 8 })
  b.sync()
  t.same(seen, ['+r'], 'at the next call')
  a.unregister('r')
  await whenEvent(b, 'unregister', () => seen.length === 2, 'the idle user noticing the unregister')
  t.same(seen, ['+r', '-r'], 'or by itself, within checkIntervalMs')
})

t.test('a user that arrives later takes the registrations as they are, without events', async (t) => {
  const store = storePath(t)
  const a = user(t, store)
  const key = makeObject(t, PAGE_SIZE, 'later')
  a.register('r', { key, byteSize: 8 })
  const b = user(t, store)
  let events = 0
  b.on('register', () => events++)
  t.same(names(b), ['r'])
  t.equal(events, 0)
})

t.test('the status route never serves a list another user has changed', async (t) => {
  const store = storePath(t)
  const app = await buildApp(t, { sharedRegistry: { path: store } })
  const other = user(t, store)
  const key = makeObject(t, PAGE_SIZE, 'route')
  const list = async () => JSON.parse((await app.inject({ method: 'GET', url: `${SYSTEM}/status` })).body)
  t.same(await list(), [], 'cached empty')
  other.register('r', { key, byteSize: 8 })
  t.same(await list(), [{ name: 'r', key, offset: 0, byte_size: 8 }])
  const response = await app.inject({ method: 'POST', url: `${SYSTEM}/region/r/register`, payload: registerBody(key, 8) })
  assertError(t, response, 400, "shared memory region 'r' already in manager")
  other.unregister('r')
  t.same(await list(), [])
})

t.test('closing: a user leaves the others\' registrations; the last one ends the registry', async (t) => {
  const store = storePath(t)
  const key = makeObject(t, PAGE_SIZE, 'close')
  const a = new Registry({ sharedRegistry: { path: store } })
  const b = new Registry({ sharedRegistry: { path: store } })
  a.register('r', { key, byteSize: 8 })
  b.acquire('r', 0, 1).release()
  const lease = a.acquire('r', 0, 1)
  a.close()
  t.ok(b.has('r'), 'the registry lives on in the other user')
  t.equal(mappingsOf(key).length, 2, 'a request in flight in the closing user keeps its mapping')
  t.throws(() => a.register('s', { key, byteSize: 8 }), { code: 'ERR_SHM_REGISTRY_CLOSED' })
  b.register('s', { key: makeObject(t, PAGE_SIZE, 'close-other'), byteSize: 8 })
  t.throws(() => a.acquire('s', 0, 1), { code: 'ERR_SHM_REGION_NOT_FOUND' }, 'a closing user maps nothing new')
  lease.release()
  t.equal(mappingsOf(key).length, 1, 'its last lease ended: unmapped')
  t.same(a.status(), [], 'and the closed user has left the store')
  t.doesNotThrow(() => a.close(), 'a second close is harmless')

  b.close()
  const c = user(t, store)
  t.same(c.status(), [], 'the last user out unregistered everything')
  t.same(mappingsOf(key), [])
})

t.test('the store file is private, and a path that cannot be a store fails with its name', async (t) => {
  const store = storePath(t)
  user(t, store)
  t.equal(statSync(store).mode & 0o777, 0o600, 'created with mode 0600')
  const directory = path.dirname(store)

  const corrupt = path.join(directory, 'corrupt.db')
  writeFileSync(corrupt, Buffer.alloc(8192, 'not a database'))
  t.throws(() => new Registry({ sharedRegistry: { path: corrupt } }),
    { message: `fastify-triton-shm: cannot open the shared registry store '${corrupt}': file is not a database` })
  const link = path.join(directory, 'link.db')
  symlinkSync(store, link)
  t.throws(() => new Registry({ sharedRegistry: { path: link } }), { message: /cannot open the shared registry store '.*link\.db': ELOOP/ },
    'a symbolic link is not followed')
  t.throws(() => new Registry({ sharedRegistry: { path: path.join(directory, 'missing', 'r.db') } }), { message: /ENOENT/ })

  const app = Fastify()
  t.teardown(() => app.close())
  await t.rejects(async () => app.register(fastifyTritonShm, { sharedRegistry: { path: corrupt } }).ready(), { message: /file is not a database/ },
    'the plugin fails app.ready()')
})

t.test('processes opening a new store together: each waits its turn to turn the write-ahead log on', async (t) => {
  // Converting the file needs the write lock, and SQLite refuses it at once (no busy wait) to a
  // process holding a read lock while another holds the write lock: as workers of a cluster
  // starting together do. Another program holding the write lock of a new file stands in for them.
  const store = storePath(t)
  writeFileSync(store, '', { mode: 0o600 })
  const writer = await startCommandChild(t, STORE_WRITER, [store], 'the store writer')
  // Held long enough for a loaded machine to come to the open well before it ends; waited for far longer.
  t.same(await writer.send({ hold: 3000 }), { result: 'held' })
  const registry = user(t, store, { sharedRegistry: { path: store, busyTimeoutMs: 30_000 } })
  t.same(registry.status(), [], 'opened once the lock was free')
  t.equal(connect(t, store).pragma('journal_mode', { simple: true }), 'wal', 'with the write-ahead log on')

  const busy = storePath(t)
  writeFileSync(busy, '', { mode: 0o600 })
  const holder = await startCommandChild(t, STORE_WRITER, [busy], 'the store writer')
  t.same(await holder.send({ hold: PATIENCE_MS }), { result: 'held' })
  t.throws(() => user(t, busy, { sharedRegistry: { path: busy, busyTimeoutMs: 50 } }),
    { code: 'ERR_SHM_STORE_OPEN_FAILED', message: `fastify-triton-shm: cannot open the shared registry store '${busy}': database is locked` },
    'a lock held past the busy timeout fails the open, naming the store')
})

t.test('a busy store: the request gets a clean 500 and nothing changes; what must wait is done later', async (t) => {
  const store = storePath(t)
  const capture = new LogCapture()
  const app = await buildApp(t, { sharedRegistry: { path: store, busyTimeoutMs: 20, checkIntervalMs: 50 } },
    { logger: { level: 'info', stream: capture.stream } })
  const key = makeObject(t, PAGE_SIZE, 'busy')
  const registry = app.systemSharedMemory
  registry.register('r', { key, byteSize: 8 })
  const lease = registry.acquire('r', 0, 1)
  registry.unregister('r')

  const blocker = connect(t, store)
  blocker.exec('BEGIN IMMEDIATE')
  const response = await app.inject({ method: 'POST', url: `${SYSTEM}/region/s/register`, payload: registerBody(key, 8) })
  assertError(t, response, 500, 'the shared memory registry is unavailable, try again')
  t.notMatch(response.body, store, 'the store\'s path is not sent')
  t.throws(() => registry.unregister('r'), { code: 'ERR_SHM_STORE_FAILED' })
  const second = registry.acquire('r', 0, 1)
  t.same(second.buffer.length, 1, 'leases need no write: they go on')
  second.release()
  t.doesNotThrow(() => lease.release(), 'a last lease whose unregister cannot be completed now does not throw')
  t.ok(capture.lines.some((line) => /will retry/.test(line.msg)), 'it is logged, and retried')
  t.same(names(registry), ['r'], 'nothing changed')

  const gone = once(registry, 'unregister')
  blocker.exec('COMMIT')
  await bounded(gone, 'the unregister completed once the store is free')
  t.same(names(registry), [])
  t.same(mappingsOf(key), [], 'and nothing leaked')
})

t.test('a broken store: requests get a clean 500, and checks say so in the log', async (t) => {
  const store = storePath(t)
  const capture = new LogCapture()
  const app = await buildApp(t, { sharedRegistry: { path: store, checkIntervalMs: 50 } }, { logger: { level: 'info', stream: capture.stream } })
  const raw = connect(t, store)
  raw.exec('DROP TABLE regions')
  const key = makeObject(t, PAGE_SIZE, 'broken')
  const response = await app.inject({ method: 'POST', url: `${SYSTEM}/region/r/register`, payload: registerBody(key, 8) })
  assertError(t, response, 500, 'the shared memory registry is unavailable, try again')
  await whenEvent(capture, 'line', () => capture.withMessage('could not check the shared memory registry').length > 0,
    'a check failing on the broken store')
  raw.exec('DROP TABLE users')
  await t.resolves(app.close(), 'the app still closes, even where it cannot leave the store')
  t.ok(capture.withMessage('could not unregister the system shared memory regions at close').length > 0, 'saying what it could not do')
})

t.test('the lease table is a file beside the store, mode 0600: nothing in /dev/shm, and the last user removes it', async (t) => {
  const store = storePath(t)
  const table = `${store}-leases`
  const before = shmMappings()
  const a = new Registry({ sharedRegistry: { path: store } })
  const b = new Registry({ sharedRegistry: { path: store } })
  const key = makeObject(t, PAGE_SIZE, 'beside')
  a.register('r', { key, byteSize: 8 })
  b.acquire('r', 0, 1).release()
  t.equal(statSync(table).mode & 0o777, 0o600, 'readable and writable by its owner only')
  t.ok(readFileSync('/proc/self/maps', 'utf8').split('\n').some((line) => line.endsWith(table)), 'mapped from beside the store')
  t.same(shmMappings().filter((line) => !line.includes(key)), before, 'nothing of the registry\'s own is mapped from /dev/shm')
  a.close()
  t.ok(existsSync(table), 'kept while another user is open')
  b.close()
  t.notOk(existsSync(table), 'removed by the last user out')

  // A joiner never follows a link put in the table's place.
  const c = user(t, store)
  rmSync(table)
  symlinkSync(store, table)
  t.throws(() => new Registry({ sharedRegistry: { path: store } }), { message: /cannot open the shared registry store '.*': open failed: ELOOP/ })
  c.close()
  const fresh = user(t, store)
  t.same(fresh.status(), [], 'the first user after everyone left replaces the link with a table of its own')
  t.ok(statSync(table, { throwIfNoEntry: false })?.isFile())
})

t.test('a lease table shrunk under the users: the checks say so, changes answer 500, leases go on', async (t) => {
  const store = storePath(t)
  const capture = new LogCapture()
  const app = await buildApp(t, { sharedRegistry: { path: store, checkIntervalMs: 50 } }, { logger: { level: 'info', stream: capture.stream } })
  const other = user(t, store)
  const key = makeObject(t, PAGE_SIZE, 'shrunk')
  other.register('r', { key, byteSize: 8 })
  truncateSync(`${store}-leases`, 0)
  const shrunk = (line: object) => /^the lease table beside the store was shrunk: leases in other processes no longer count here/.test((line as { reason?: string }).reason ?? '')
  await whenEvent(capture, 'line', () => capture.withMessage('could not check the shared memory registry').some(shrunk),
    'a check noticing the shrunk lease table')
  const response = await app.inject({ method: 'POST', url: `${SYSTEM}/region/s/register`, payload: registerBody(key, 8) })
  assertError(t, response, 500, 'the shared memory registry is unavailable, try again')
  t.throws(() => other.unregister('r'), { code: 'ERR_SHM_STORE_FAILED' }, 'an unregister cannot tell who holds the region')
  const lease = app.systemSharedMemory.acquire('r', 0, 1)
  t.same(lease.buffer.length, 1, 'a lease still serves its region')
  lease.release()
  await t.resolves(app.close(), 'the app still closes')
})

t.test('better-sqlite3 is loaded only for sharedRegistry, with an error naming it if absent', async (t) => {
  const missing = () => { throw Object.assign(new Error("Cannot find module 'better-sqlite3'"), { code: 'MODULE_NOT_FOUND' }) }
  t.throws(() => new SqliteStore({ path: storePath(t) }, missing),
    { message: "fastify-triton-shm: the sharedRegistry option needs the package 'better-sqlite3': npm install better-sqlite3" })
  const broken = () => { throw new Error('was compiled against a different Node.js version') }
  t.throws(() => optionalPeer('better-sqlite3', 'a feature', broken),
    { message: "a feature could not load the package 'better-sqlite3': was compiled against a different Node.js version" })
})

t.test('process identity: pid and start time, read past a command name with spaces and parentheses', async (t) => {
  const own = processStartTime(process.pid) as number
  t.ok(Number.isSafeInteger(own) && own > 0)
  t.equal(processStartTime(2 ** 22 + 1), undefined, 'no such process')

  // The kernel names a process after the file it ran: here, a link to node with an awkward name.
  const directory = mkdtempSync(path.join(tmpdir(), 'fts-comm-'))
  t.teardown(() => rmSync(directory, { recursive: true, force: true }))
  const awkward = path.join(directory, 'a) b (c')
  symlinkSync(process.execPath, awkward)
  const child = spawn(awkward, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore', env: { ...process.env, NODE_OPTIONS: '' } })
  t.teardown(() => child.kill('SIGKILL'))
  await once(child, 'spawn')
  t.match(readFileSync(`/proc/${child.pid}/stat`, 'latin1'), '(a) b (c) ', 'the name holds spaces and parentheses')
  const started = processStartTime(child.pid as number) as number
  t.ok(Number.isSafeInteger(started) && started >= own, `a start time after this process's (${started} >= ${own})`)
})
