/**
 * Both transports on Unix domain sockets, over real sockets: the plugin's gRPC listener on a path
 * (alone or beside its port), its socket file (mode, owner, removed at close, a path taken refused
 * and left alone), and the Node clients of both transports reaching a server on a socket. The peer
 * rule over these sockets, for a second local user, is in test/peer-policy.test.ts.
 */
import { once } from 'node:events'
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import net from 'node:net'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { status } from '@grpc/grpc-js'
import Fastify, { type FastifyInstance } from 'fastify'
import t, { type Test } from 'tap'
import { GrpcKServeClient } from '../lib/grpc'
import fastifyTritonShm, { type GrpcListenerOptions, KServeClient, kserveModels, ServerError, SharedMemoryObject } from '../lib/index'
import { modelTable } from './helpers/grpc'
import { sumModel } from './helpers/kserve'
import { peerUser } from './helpers/local-user'
import { uniqueKey, unlinkOnTeardown } from './helpers/shm'

/** A private directory for sockets, removed when the test ends. */
function socketDirectory (t: Test): string {
  const directory = mkdtempSync(path.join(tmpdir(), 'fts-unix-'))
  t.teardown(() => rmSync(directory, { recursive: true, force: true }))
  return directory
}

/** An app serving `simple` over gRPC as `grpc` says (and over HTTP, on no listener yet); closed when the test ends. */
async function service (t: Test, grpc: GrpcListenerOptions): Promise<FastifyInstance> {
  const app = Fastify()
  t.teardown(() => app.close())
  const models = modelTable([sumModel()])
  await app.register(fastifyTritonShm, { grpc: { models, ...grpc } })
  await app.register(kserveModels, { models })
  return app
}

const shm = (region: string, offset: number) => ({ shared_memory_region: region, shared_memory_offset: offset, shared_memory_byte_size: 64 })

/** The whole flow of Triton's shm example with `client`: register, infer (inputs and outputs in
 * the region), the outputs read back, status, unregister. */
async function shmFlow (t: Test, client: KServeClient | GrpcKServeClient, label: string) {
  const key = uniqueKey(label)
  const region = SharedMemoryObject.create(key, 256)
  unlinkOnTeardown(t, key)
  t.teardown(() => region.close())
  new Int32Array(region.bytes.buffer, 0, 32).set([...Array(16).keys(), ...new Array(16).fill(2)])
  await client.registerSystemSharedMemory('inputs', key, 128)
  await client.registerSystemSharedMemory('outputs', key, 128, 128)
  const response = await client.infer('simple', {
    inputs: [0, 1].map((index) => ({ name: `INPUT${index}`, datatype: 'INT32', shape: [1, 16], parameters: shm('inputs', 64 * index) })),
    outputs: [0, 1].map((index) => ({ name: `OUTPUT${index}`, parameters: shm('outputs', 64 * index) }))
  })
  t.same(response.outputs.map(({ name, shape }) => ({ name, shape })), [{ name: 'OUTPUT0', shape: [1, 16] }, { name: 'OUTPUT1', shape: [1, 16] }])
  t.same(Array.from(new Int32Array(region.bytes.buffer, 128, 16)), [...Array(16).keys()].map((value) => value + 2), 'OUTPUT0 in shared memory')
  t.same(Array.from(new Int32Array(region.bytes.buffer, 192, 16)), [...Array(16).keys()].map((value) => value - 2), 'OUTPUT1 in shared memory')
  t.same((await client.systemSharedMemoryStatus()).map(({ name }) => name), ['inputs', 'outputs'])
  await client.unregisterSystemSharedMemory()
  t.same(await client.systemSharedMemoryStatus(), [])
}

t.test('gRPC on a Unix socket alone: register and infer through shared memory, the client\'s user known by SO_PEERCRED', async (t) => {
  const socketPath = path.join(socketDirectory(t), 'grpc.sock')
  const app = await service(t, { path: socketPath })
  await app.ready()
  t.same(app.tritonGrpc, { port: undefined, path: socketPath }, 'no port: the socket instead of it')
  t.ok(statSync(socketPath).isSocket())
  const client = new GrpcKServeClient(`unix://${socketPath}`)
  t.teardown(() => client.close())
  // The default rule ('peer'): served only because the kernel names this client, the object's owner.
  await shmFlow(t, client, 'grpc_unix')
})

t.test('beside the port when one is given: both serve the same registry', async (t) => {
  const socketPath = path.join(socketDirectory(t), 'grpc.sock')
  const app = await service(t, { port: 0, path: socketPath })
  await app.ready()
  const { port, path: listening } = app.tritonGrpc
  t.equal(listening, socketPath)
  t.type(port, 'number')
  const overTcp = new GrpcKServeClient(`127.0.0.1:${port as number}`)
  const overSocket = new GrpcKServeClient(`unix://${socketPath}`)
  t.teardown(() => { overTcp.close(); overSocket.close() })
  const key = uniqueKey('grpc_both')
  const region = SharedMemoryObject.create(key, 64)
  unlinkOnTeardown(t, key)
  t.teardown(() => region.close())
  await overSocket.registerSystemSharedMemory('from-socket', key, 64)
  t.same(await overTcp.systemSharedMemoryStatus(), [{ name: 'from-socket', key, offset: 0, byte_size: 64 }], 'registered on the socket, seen over TCP')
  await overTcp.unregisterSystemSharedMemory('from-socket')
  t.same(await overSocket.systemSharedMemoryStatus(), [])
})

t.test('the socket file: its mode as asked, removed when the app closes', async (t) => {
  const socketPath = path.join(socketDirectory(t), 'grpc.sock')
  const app = await service(t, { path: socketPath, socketMode: 0o600 })
  await app.ready()
  t.equal(statSync(socketPath).mode & 0o7777, 0o600)
  const open = await service(t, { path: socketPath + '-open', socketMode: 0o666 })
  await open.ready()
  t.equal(statSync(socketPath + '-open').mode & 0o7777, 0o666)
  await app.close()
  await open.close()
  t.notOk(existsSync(socketPath), 'removed at close')
  t.notOk(existsSync(socketPath + '-open'))
})

t.test('the socket file\'s owner and group, as asked', async (t) => {
  const user = peerUser(t, 'a socket file given to another local user')
  if (user === undefined) return
  const socketPath = path.join(socketDirectory(t), 'grpc.sock')
  const app = await service(t, { path: socketPath, socketOwner: { uid: user.uid, gid: user.gid } })
  await app.ready()
  const { uid, gid } = statSync(socketPath)
  t.same({ uid, gid }, { uid: user.uid, gid: user.gid })
  const groupOnly = await service(t, { path: socketPath + '-group', socketOwner: { gid: user.gid } })
  await groupOnly.ready()
  const file = statSync(socketPath + '-group')
  t.same({ uid: file.uid, gid: file.gid }, { uid: process.getuid?.(), gid: user.gid }, 'the group alone: the owner stays the server\'s')
  const ownerOnly = await service(t, { path: socketPath + '-owner', socketOwner: { uid: user.uid } })
  await ownerOnly.ready()
  const owned = statSync(socketPath + '-owner')
  t.same({ uid: owned.uid, gid: owned.gid }, { uid: user.uid, gid: process.getgid?.() }, 'the owner alone: the group stays the server\'s')
})

t.test('the owner alone or the group alone: the other is left as it was (any user: its own ids)', async (t) => {
  const socketPath = path.join(socketDirectory(t), 'grpc.sock')
  const uid = process.getuid?.() as number
  const gid = process.getgid?.() as number
  const ownerOnly = await service(t, { path: socketPath + '-owner', socketOwner: { uid } })
  await ownerOnly.ready()
  const owned = statSync(socketPath + '-owner')
  t.same({ uid: owned.uid, gid: owned.gid }, { uid, gid })
  const groupOnly = await service(t, { path: socketPath + '-group', socketOwner: { gid } })
  await groupOnly.ready()
  const grouped = statSync(socketPath + '-group')
  t.same({ uid: grouped.uid, gid: grouped.gid }, { uid, gid })
})

t.test('a path taken is refused, and what is there is left alone', async (t) => {
  const directory = socketDirectory(t)
  const message = (socketPath: string) => `fastify-triton-shm: cannot listen for gRPC on '${socketPath}': a file is there already ` +
    '(a server listening on it, or a socket left by one that stopped without closing): remove it if no server uses it'

  t.test('another server listening there: it keeps serving', async (t) => {
    const socketPath = path.join(directory, 'live.sock')
    const other = net.createServer((socket) => socket.end('still here'))
    other.listen(socketPath)
    await once(other, 'listening')
    t.teardown(() => new Promise((resolve) => other.close(resolve)))
    const app = await service(t, { port: 0, path: socketPath })
    await t.rejects(async () => { await app.ready() }, { code: 'ERR_SHM_GRPC_SOCKET_PATH_TAKEN', message: message(socketPath) })
    const connection = net.connect(socketPath)
    const [answer] = await once(connection, 'data') as [Buffer]
    t.equal(answer.toString(), 'still here')
  })

  t.test('a file left there: not removed', async (t) => {
    const socketPath = path.join(directory, 'left.sock')
    writeFileSync(socketPath, 'not a socket')
    const app = await service(t, { path: socketPath })
    await t.rejects(async () => { await app.ready() }, { code: 'ERR_SHM_GRPC_SOCKET_PATH_TAKEN', message: message(socketPath) })
    t.equal(readFileSync(socketPath, 'utf8'), 'not a socket')
  })
})

t.test('a path that cannot be a socket\'s: refused before anything is bound', async (t) => {
  const long = path.join(socketDirectory(t), 'x'.repeat(120) + '.sock')
  const app = await service(t, { path: long })
  await t.rejects(async () => { await app.ready() }, {
    name: 'TypeError',
    code: 'ERR_SHM_GRPC_SOCKET_PATH_TOO_LONG',
    message: `fastify-triton-shm: option 'grpc.path' '${long}' is longer than the 107 bytes a socket's path may hold`
  })
  t.notOk(existsSync(long))
  const nowhere = path.join(socketDirectory(t), 'missing', 'grpc.sock')
  await t.rejects(async () => { await (await service(t, { path: nowhere })).ready() }, { message: /^listen E[A-Z]+: .*\/missing\/grpc\.sock$/ }, 'a directory that is not there: the bind\'s own error')
  await t.rejects(service(t, { socketMode: 0o600 }), { code: 'ERR_SHM_INVALID_OPTION', message: /must have property path when property socketMode is present/ },
    'a mode with no socket')
})

t.test('KServeClient over HTTP on a Unix socket (socketPath): the whole flow, and refusals as ServerError', async (t) => {
  const socketPath = path.join(socketDirectory(t), 'http.sock')
  const app = await service(t, { port: 0 })
  await app.listen({ path: socketPath })
  const client = new KServeClient('http://localhost', { socketPath })
  await shmFlow(t, client, 'http_unix')
  await t.rejects(client.systemSharedMemoryStatus('nothing'), new ServerError(404, "Unable to find system shared memory region: 'nothing'"))
  await t.rejects(client.infer('missing', { inputs: [] }), { name: 'ServerError', statusCode: 404 })
})

t.test('GrpcKServeClient on a socket nobody listens on: UNAVAILABLE', async (t) => {
  const client = new GrpcKServeClient(`unix://${path.join(socketDirectory(t), 'none.sock')}`)
  t.teardown(() => client.close())
  await t.rejects(client.systemSharedMemoryStatus(), { code: status.UNAVAILABLE })
})
