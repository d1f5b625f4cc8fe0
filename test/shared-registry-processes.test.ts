/**
 * The shared registry across real processes: separately started ones racing for names and dying
 * with leases held, and a node:cluster service whose workers share one port.
 */
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { closeSync, openSync, readFileSync, readSync, statSync, writeSync } from 'node:fs'
import http from 'node:http'
import path from 'node:path'
import { setTimeout } from 'node:timers/promises'
import { createInterface } from 'node:readline'
import Database from 'better-sqlite3'
import t, { type Test } from 'tap'
import { Registry } from '../lib/registry/registry'
import { PROCESS_SLOTS } from '../lib/store/lease-table'
import { registerBody, SYSTEM } from './helpers/app'
import type { Reply } from './helpers/command-child'
import { type RegistryPeer, startPeer, storePath } from './helpers/registry-peer'
import { createObject, unlinkObject } from '../lib/addon/posix-shm'
import { LogCapture } from './helpers/observe'
import { makeObject, mappingsOf, objectPath, PAGE_SIZE, writeObjectFile } from './helpers/shm'
import { bounded, whenEvent } from './helpers/sync'
import { killGroup } from './helpers/process-group'

const CLUSTER = path.join(__dirname, 'fixtures', 'shared-registry-cluster.ts')

function user (t: Test, store: string): Registry {
  const registry = new Registry({ sharedRegistry: { path: store, checkIntervalMs: 100 } })
  t.teardown(() => registry.close())
  return registry
}

t.test('processes racing to register the same names: exactly one wins each', async (t) => {
  const store = storePath(t)
  const key = makeObject(t, PAGE_SIZE, 'race')
  const peers: RegistryPeer[] = await Promise.all([0, 1, 2, 3].map(() => startPeer(t, store)))
  const names = Array.from({ length: 40 }, (_, index) => `r${index}`)
  // Every peer gets its command at once; each registers the names in its own order.
  const results = await Promise.all(peers.map((peer, index) => peer.send({
    op: 'registerEach', names: index % 2 === 0 ? names : [...names].reverse(), key, byteSize: 8
  })))
  const outcomes = results.map(({ result }, index) => {
    const list = result as Array<true | string>
    return index % 2 === 0 ? list : [...list].reverse()
  })
  for (const [position, name] of names.entries()) {
    const winners = outcomes.filter((outcome) => outcome[position] === true).length
    const losers = outcomes.filter((outcome) => outcome[position] === `shared memory region '${name}' already in manager`).length
    if (winners !== 1 || losers !== 3) t.fail(`${name}: ${winners} winners, ${losers} refused with the duplicate message`)
  }
  t.pass('one winner and three duplicate refusals for each of the 40 names')
  t.same(user(t, store).status().map((region) => region.name).sort(), [...names].sort(), 'every name registered once')
})

t.test('a process killed with SIGKILL while holding a lease: its hold is reclaimed, the region goes', async (t) => {
  const store = storePath(t)
  const registry = user(t, store)
  const key = makeObject(t, PAGE_SIZE, 'killed')
  writeObjectFile(key, 0, [5, 6])
  registry.register('r', { key, byteSize: 8 })
  const [holder, witness] = [await startPeer(t, store), await startPeer(t, store)]
  const { result } = await holder.send({ op: 'acquire', name: 'r', offset: 0, byteSize: 2 })
  t.same((result as { bytes: number[] }).bytes, [5, 6], 'the other process reads the region')

  registry.unregister('r')
  t.same((await witness.send({ op: 'status' })).result, registry.status(), 'deferred: still listed everywhere')
  t.equal(registry.status().length, 1)
  await holder.kill()
  await whenEvent(registry, 'unregister', () => !registry.has('r'), 'the region going after its holder died')
  t.same((await witness.send({ op: 'status' })).result, [], 'gone everywhere, without another unregister')
  t.same(mappingsOf(key), [], 'nothing maps it here')
})

t.test('the first process after all others died starts an empty registry', async (t) => {
  const store = storePath(t)
  const key = makeObject(t, PAGE_SIZE, 'restart')
  const only = await startPeer(t, store)
  t.same(await only.send({ op: 'register', name: 'r', key, byteSize: 8 }), { result: null })
  await only.kill()
  t.same(user(t, store).status(), [], 'registrations die with the service, as they do with a Triton server')
})

t.test('a process killed inside a write leaves the store as it was, and unlocked', async (t) => {
  const store = storePath(t)
  const registry = user(t, store)
  const key = makeObject(t, PAGE_SIZE, 'mid-write')
  const writer = spawn(process.execPath, ['-e', `
    const db = new (require('better-sqlite3'))(process.argv[1])
    db.exec('BEGIN IMMEDIATE')
    db.prepare("INSERT INTO regions (name, key, offset, byte_size, slot) VALUES ('half', 'k', 0, 8, 0)").run()
    console.log('written, not committed')
    setInterval(() => {}, 1000)`, store], { stdio: ['ignore', 'pipe', 'inherit'], cwd: path.join(__dirname, '..') })
  const exited = once(writer, 'exit')
  t.teardown(() => writer.kill('SIGKILL'))
  const [line] = await bounded(once(createInterface({ input: writer.stdout }), 'line'), 'the writer inside its transaction')
  t.equal(line, 'written, not committed')
  writer.kill('SIGKILL')
  await exited
  t.same(registry.status(), [], 'the uncommitted row is not there')
  registry.register('r', { key, byteSize: 8 })
  t.same(registry.status().map((region) => region.name), ['r'], 'and the store takes writes')
  const raw = new Database(store, { readonly: true })
  t.teardown(() => raw.close())
  t.equal(raw.pragma('integrity_check', { simple: true }), 'ok')
})

/** The lease table's cell of a process slot on a region slot, in the file every process maps:
 * read and written as any other program (or a stray write) would, with no help from the code. */
function leaseCell (store: string, processSlot: number, regionSlot: number) {
  const position = (16 + regionSlot * PROCESS_SLOTS + processSlot) * 4
  const cell = Buffer.alloc(4)
  const path = `${store}-leases`
  return {
    read: () => {
      const fd = openSync(path, 'r')
      try { readSync(fd, cell, 0, 4, position) } finally { closeSync(fd) }
      return cell.readInt32LE(0)
    },
    write: (value: number) => {
      const fd = openSync(path, 'r+')
      try { cell.writeInt32LE(value, 0); writeSync(fd, cell, 0, 4, position) } finally { closeSync(fd) }
    }
  }
}

/** The slots the store gave a process and a region. */
function slotsOf (store: string, pid: number, region: string): { processSlot: number, regionSlot: number } {
  const raw = new Database(store, { readonly: true })
  try {
    return {
      processSlot: raw.prepare('SELECT slot FROM users WHERE pid = ?').pluck().get(pid) as number,
      regionSlot: raw.prepare('SELECT slot FROM regions WHERE name = ?').pluck().get(region) as number
    }
  } finally {
    raw.close()
  }
}

t.test('garbage over a live process\'s lease counter is counted as no lease, reset and logged: it holds no unregister', async (t) => {
  const store = storePath(t)
  const capture = new LogCapture()
  const registry = new Registry({ logger: capture.logger(), sharedRegistry: { path: store, checkIntervalMs: 100 } })
  t.teardown(() => registry.close())
  const key = makeObject(t, PAGE_SIZE, 'garbage')
  const peer = await startPeer(t, store)

  for (const [garbage, holding] of [[0x41414141, false], [-2, false], [2, true]] as const) {
    registry.register('r', { key, byteSize: 8 })
    const { result } = await peer.send({ op: 'acquire', name: 'r', offset: 0, byteSize: 2 })
    const { lease } = result as { lease: number }
    if (!holding) await peer.send({ op: 'release', lease })
    const cell = leaseCell(store, ...Object.values(slotsOf(store, peer.pid, 'r')) as [number, number])
    t.equal(cell.read(), holding ? 1 : 0, `the peer's counter says whether it holds r (${holding})`)
    cell.write(garbage)

    capture.clear()
    registry.unregister('r')
    t.notOk(registry.has('r'), `${garbage}: the unregister is not held by a damaged counter`)
    t.same((await peer.send({ op: 'status' })).result, [], 'gone for the peer too')
    t.equal(cell.read(), 0, 'the damaged counter is reset')
    await whenEvent(capture, 'line', () => capture.lines.some((line) => String(line.reason).includes('damaged')), 'the damage logged')
    const [logged] = capture.lines.filter((line) => String(line.reason).includes('damaged'))
    t.match(logged.reason, new RegExp(`region 'r' .*: ${garbage} \\(a counter is 0 or 1\\); counted as no lease, and reset`), String(logged.reason))
    if (holding) {
      // The peer's requests on its lease stay safe: it keeps its own mapping until its lease ends.
      t.ok(readFileSync(`/proc/${peer.pid}/maps`, 'utf8').includes(objectPath(key)), 'the holding peer still maps the region')
      await peer.send({ op: 'release', lease })
      t.equal(cell.read(), 0, 'and its letting go leaves the counter at 0')
    }
  }
})

/** Garbage over every frame of the store's write-ahead log (its 32-byte header kept), as a stray
 * write would leave it: what the processes had committed there is unreadable from now on. */
function damageWal (store: string): void {
  const wal = `${store}-wal`
  const frames = statSync(wal).size - 32
  const fd = openSync(wal, 'r+')
  try {
    writeSync(fd, Buffer.from(Array.from({ length: frames }, (_, index) => (index * 131 + 7) & 0xff)), 0, frames, 32)
  } finally {
    closeSync(fd)
  }
}

/** What each of the peers answers to one command, without the pid of the one that answered. */
const answersOf = (peers: RegistryPeer[], command: object) => Promise.all(peers.map((peer) => peer.send(command)))

const outcome = (reply: Reply) => reply.error === undefined ? 'served' : `${reply.kind} ${reply.code}`

const STORE_FAILED = { error: 'the shared memory registry is unavailable, try again', kind: 'internal', code: 'ERR_SHM_STORE_FAILED' }

t.test('a write-ahead log damaged under two processes: neither acknowledges a change, and both refuse it alike', async (t) => {
  const key = makeObject(t, PAGE_SIZE, 'wal')
  // up to date: both read the store after its last change; one behind: the other one's last change
  // is unread by the first (the writer reads its own at once).
  for (const phase of ['up to date', 'one behind'] as const) {
    const store = storePath(t)
    const peers = [await startPeer(t, store), await startPeer(t, store)]
    // Each registers in turn, so each has other pages of the store in its cache.
    for (let index = 0; index < 6; index++) {
      t.same(await peers[index % 2].send({ op: 'register', name: `before${index}`, key, byteSize: 8 }), { result: null })
    }
    if (phase === 'up to date') await answersOf(peers, { op: 'status' })
    damageWal(store)

    for (let round = 0; round < 3; round++) {
      for (const [index, peer] of peers.entries()) {
        t.same(await peer.send({ op: 'register', name: `after${round}_${index}`, key, byteSize: 8 }), STORE_FAILED,
          `${phase}, round ${round}: a register in process ${index} is refused with the store's 500`)
      }
    }
    t.same(await answersOf(peers, { op: 'unregister', name: 'before0' }), [STORE_FAILED, STORE_FAILED], `${phase}: so is an unregister, in both`)
    // A process may answer from what it read until its next check reads the store again (100 ms here).
    await bounded((async () => {
      while ((await answersOf(peers, { op: 'status' })).some((reply) => reply.code !== STORE_FAILED.code)) await setTimeout(20)
    })(), `${phase}: both refusing the damaged store`)
    t.pass(`${phase}: from their next check on, both refuse a status`)
    t.same((await answersOf(peers, { op: 'acquire', name: 'before5', offset: 0, byteSize: 1 })).map(outcome),
      ['internal ERR_SHM_STORE_FAILED', 'internal ERR_SHM_STORE_FAILED'], `${phase}: and a lease`)
  }
})

interface Answer { statusCode: number, worker: number, body: string }

/** One request on a connection of its own (so each may reach another worker). */
async function fresh (port: number, method: string, url: string, body?: string): Promise<Answer> {
  const request = http.request({ host: '127.0.0.1', port, method, path: url, agent: false, headers: { connection: 'close' } })
  request.end(body)
  const [response] = await bounded(once(request, 'response'), `${method} ${url}`) as [http.IncomingMessage]
  let text = ''
  for await (const chunk of response) text += chunk
  return { statusCode: response.statusCode as number, worker: Number(response.headers['x-worker-pid']), body: text }
}

async function startCluster (t: Test, store: string, workers: number): Promise<number> {
  const primary = spawn(process.execPath, ['--import', 'tsx', CLUSTER, store, String(workers)], {
    env: { ...process.env, _TAPJS_PROCESSINFO_COVERAGE_: '0' },
    stdio: ['ignore', 'pipe', 'inherit'],
    detached: true
  })
  const exited = once(primary, 'exit')
  t.teardown(async () => {
    killGroup(primary.pid as number) // the primary and its workers
    await exited
  })
  const ended = exited.then(([code]) => { throw new Error(`the cluster ended (exit code ${code}) before listening`) })
  ended.catch(() => {}) // a rejection only while the line is awaited
  const [line] = await bounded(Promise.race([once(createInterface({ input: primary.stdout }), 'line'), ended]), 'the cluster listening')
  return JSON.parse(line).port
}

t.test('node:cluster: workers on one port share one registry, and a worker killed with a lease releases it', async (t) => {
  const store = storePath(t)
  const port = await startCluster(t, store, 3)
  const observer = user(t, store)
  const key = makeObject(t, PAGE_SIZE, 'cluster')
  writeObjectFile(key, 0, [1, 2, 3, 4])

  const registered = await fresh(port, 'POST', `${SYSTEM}/region/r/register`, registerBody(key, 64))
  t.equal(registered.statusCode, 200, `registered through worker ${registered.worker}`)
  const answers = await Promise.all(Array.from({ length: 12 }, () => fresh(port, 'GET', '/sum/r')))
  const workers = new Set(answers.map((answer) => answer.worker))
  t.ok(workers.size >= 2, `requests reached ${workers.size} workers`)
  t.ok(answers.every((answer) => answer.statusCode === 200 && JSON.parse(answer.body).sum === 10), 'every worker serves the region')
  const duplicate = await fresh(port, 'POST', `${SYSTEM}/region/r/register`, registerBody(key, 64))
  t.equal(duplicate.statusCode, 400, 'a register reaching another worker is a duplicate')

  const holding = await fresh(port, 'GET', '/hold/r')
  t.equal(holding.statusCode, 200)
  t.equal((await fresh(port, 'POST', `${SYSTEM}/region/r/unregister`)).statusCode, 200)
  const listings = await Promise.all(Array.from({ length: 6 }, () => fresh(port, 'GET', `${SYSTEM}/status`)))
  t.ok(listings.every((listing) => JSON.parse(listing.body).length === 1), 'deferred: every worker still lists it')

  process.kill(holding.worker, 'SIGKILL')
  await whenEvent(observer, 'unregister', () => !observer.has('r'), 'the region going after the holding worker died')
  const after = await Promise.all(Array.from({ length: 6 }, () => fresh(port, 'GET', `${SYSTEM}/status`)))
  t.ok(after.every((listing) => listing.statusCode === 200 && listing.body === '[]'), 'no worker lists it any more')
})

t.test('node:cluster: an object recreated under a registered key is served by no worker', async (t) => {
  const store = storePath(t)
  const port = await startCluster(t, store, 2)
  const key = makeObject(t, PAGE_SIZE, 'recreated')
  writeObjectFile(key, 0, [1, 2, 3, 4])
  const registered = await fresh(port, 'POST', `${SYSTEM}/region/r/register`, registerBody(key, 64))
  t.equal(registered.statusCode, 200)
  // Another object under the same name: what a client recreating it, or another user, would leave.
  unlinkObject(key)
  createObject(key, PAGE_SIZE)
  writeObjectFile(key, 0, [5, 5, 5, 5])

  const answers = await Promise.all(Array.from({ length: 16 }, () => fresh(port, 'GET', '/sum/r')))
  t.equal(new Set(answers.map((answer) => answer.worker)).size, 2, 'both workers answered')
  const served = answers.filter((answer) => answer.statusCode === 200)
  const refused = answers.filter((answer) => answer.statusCode === 400)
  t.ok(served.every((answer) => answer.worker === registered.worker && JSON.parse(answer.body).sum === 10),
    'the registering worker serves the registered object, from its mapping')
  t.ok(refused.length > 0 && refused.every((answer) => answer.worker !== registered.worker &&
    JSON.parse(answer.body).code === 'ERR_SHM_REGION_UNAVAILABLE'), 'the other worker refuses the new object')
  t.equal(served.length + refused.length, answers.length, 'every answer is one of the two')
})
