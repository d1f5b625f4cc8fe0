/**
 * Safe by default: a client may register only shared memory it could open read-write itself,
 * its user asked of the kernel, never of anything it sends. Clients run as a second local user
 * (`shmpeer`) and as root, over HTTP and gRPC, each on TCP and on a Unix socket, against objects of
 * root's (private, readable by others, read-write for all) and of their own; plus a client in
 * another network namespace, whom the kernel cannot name. Every refusal maps nothing and changes
 * nothing; `clientShmAccess` opens the rule as documented. The rule's decisions are also checked by
 * their inputs (the connection the kernel names, the identity and the object's owner and mode), so
 * that every branch is reached by a user who can run no second user's client.
 */
import { spawn } from 'node:child_process'
import { chmodSync, chownSync, cpSync, statSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { credentials, Server, ServerCredentials, status } from '@grpc/grpc-js'
import Fastify, { type FastifyInstance } from 'fastify'
import t, { type Test } from 'tap'
import { connectionInterceptor, GrpcKServeClient, inferenceService, sharedMemoryService } from '../lib/grpc'
import fastifyTritonShm, { type ClientShmAccess, Registry } from '../lib/index'
import { userGroups } from '../lib/addon/peer-identity'
import { type CallerConnection, CLIENT_SHM_ACCESS, PeerPolicy } from '../lib/registry/peer-policy'
import { cannotCheckHere } from './helpers/ci'
import { grpcClient, startServer } from './helpers/grpc'
import { type LocalUser, peerUser } from './helpers/local-user'
import { endsOf, noNetworkNamespaces, otherNamespace, plainNode, sharedScratch } from './helpers/peer-clients'
import { makeObject, mappingsOf, objectPath, openFdCount, PAGE_SIZE } from './helpers/shm'

/**
 * One register per invocation, printed as one JSON line: over HTTP (`http <host> <port> ...`, or
 * `http <socket path> - ...`) its status and body; over gRPC (`grpc <host:port> ...`, a real
 * grpc-js client copied beside this script, the message encoded by hand) its code and details.
 */
const REGISTER_SCRIPT = `'use strict'
const http = require('node:http')
const [transport, target, port, name, key, byteSize] = process.argv.slice(2)
const print = (result) => { process.stdout.write(JSON.stringify(result) + '\\n') }
if (transport === 'http') {
  const body = JSON.stringify({ key, byte_size: Number(byteSize) })
  const where = port === '-' ? { socketPath: target } : { host: target, port: Number(port) }
  const request = http.request({ ...where, method: 'POST', path: '/v2/systemsharedmemory/region/' + encodeURIComponent(name) + '/register' }, (response) => {
    let text = ''
    response.on('data', (chunk) => { text += chunk })
    response.on('end', () => print({ status: response.statusCode, body: text }))
  })
  request.end(body)
} else {
  const grpc = require('./node_modules/@grpc/grpc-js')
  const string = (field, text) => { const bytes = Buffer.from(text); return Buffer.concat([Buffer.of(field << 3 | 2, bytes.length), bytes]) }
  const varint = (field, value) => { const bytes = [field << 3]; do { bytes.push((value & 0x7f) | (value > 0x7f ? 0x80 : 0)); value >>>= 7 } while (value > 0); return Buffer.from(bytes) }
  const message = Buffer.concat([string(1, name), string(2, key), varint(4, Number(byteSize))])
  const client = new grpc.Client(target, grpc.credentials.createInsecure())
  client.makeUnaryRequest('/inference.GRPCInferenceService/SystemSharedMemoryRegister', (bytes) => bytes, (bytes) => bytes, message, (error) => {
    print(error === null ? { code: 0 } : { code: error.code, details: error.details })
    client.close()
  })
}
`

interface Answer { status?: number, body?: string, code?: number, details?: string }

/** The client script in a directory every user can read, with grpc-js beside it (a user other
 * than the checkout's may not be able to read its node_modules). */
function registerClient (t: Test): string {
  const directory = sharedScratch(t, 'peer-policy')
  for (const name of ['@grpc/grpc-js', '@js-sdsl/ordered-map']) {
    cpSync(path.dirname(require.resolve(`${name}/package.json`)), path.join(directory, 'node_modules', name), { recursive: true })
  }
  const script = path.join(directory, 'register.js')
  writeFileSync(script, REGISTER_SCRIPT, { mode: 0o644 })
  return script
}

interface RunAs { uid?: number, gid?: number, prefix?: string[] }

/** Runs one register from a client process; resolves with its answer. */
function registerFrom (script: string, args: string[], runAs: RunAs = {}): Promise<Answer> {
  const [command, ...rest] = plainNode([script, ...args], runAs.prefix)
  const child = spawn(command, rest, { uid: runAs.uid, gid: runAs.gid, cwd: path.dirname(script), env: { PATH: process.env.PATH ?? '/usr/bin:/bin' } })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (chunk) => { stdout += chunk })
  child.stderr.on('data', (chunk) => { stderr += chunk })
  return new Promise((resolve, reject) => {
    child.on('close', (code) => {
      if (code === 0) resolve(JSON.parse(stdout) as Answer)
      else reject(new Error(`the client exited with ${String(code)}: ${stderr}`))
    })
  })
}

/** The objects of the table: root's private one, root's readable by others, one read-write for
 * all, and the peer user's own. */
function objects (t: Test, user: LocalUser) {
  const object = (label: string, mode: number, owner?: LocalUser) => {
    const key = makeObject(t, PAGE_SIZE, label)
    if (owner !== undefined) chownSync(objectPath(key), owner.uid, owner.gid)
    chmodSync(objectPath(key), mode)
    return key
  }
  return {
    rootPrivate: object('root_0600', 0o600),
    rootReadable: object('root_0644', 0o644),
    everyones: object('root_0666', 0o666),
    peersOwn: object('peer_0600', 0o600, user)
  }
}

async function service (t: Test, options: { clientShmAccess?: ClientShmAccess } = {}): Promise<FastifyInstance> {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(fastifyTritonShm, { ...options, grpc: { port: 0 } })
  return app
}

const DENIED = (name: string, key: string) =>
  `cannot register shared memory region '${name}' with key '${key}': the connecting user may not open this object read-write`

/** Who this process's user is, as the peer rule names a client of this host. */
const thisUser = () => ({ uid: process.getuid?.() as number, gids: userGroups(process.getuid?.() as number) })

t.test('the rule by its inputs, for any user: who the kernel says the connection is, and each access setting', async (t) => {
  // A Fastify app answers, for each call, what each setting decides for the call's connection:
  // inject()'s (this process), and a real TCP connection (this user, as the kernel names it).
  const policies = Object.fromEntries(CLIENT_SHM_ACCESS.map((access) => [access, new PeerPolicy(access)]))
  const app = Fastify()
  t.teardown(() => app.close())
  const decide = (connection: CallerConnection) => Object.fromEntries(CLIENT_SHM_ACCESS.map((access) =>
    [access, policies[access].peerFor(connection) ?? String(policies[access].peerFor(connection))]))
  // Over HTTP the face gives the socket; over gRPC, the connection's four ends.
  app.get('/decisions', async (request) => ({
    socket: decide({ socket: request.socket }),
    addresses: decide(request.socket.remotePort === undefined ? undefined : { addresses: endsOf(request.socket) })
  }))
  await app.listen({ host: '127.0.0.1', port: 0 })
  const { port } = app.server.address() as { port: number }
  const overTcp = await (await fetch(`http://127.0.0.1:${port}/decisions`)).json()
  const named = { peer: thisUser(), local: 'undefined', any: 'undefined' }
  t.same(overTcp, { socket: named, addresses: named },
    'TCP from this host: peer judges by this user; local and any by what the server may open')
  const injected = (await app.inject('/decisions')).json()
  t.equal(injected.socket.peer.uid, thisUser().uid, 'inject(): this process itself, for peer')
  t.same([injected.socket.local, injected.socket.any], ['undefined', 'undefined'])

  const unnamed: CallerConnection[] = [
    undefined,
    { addresses: {} },
    { addresses: { localAddress: '127.0.0.1', localPort: 8001, remoteAddress: '127.0.0.1' } },
    // A gRPC call over a Unix socket: grpc-js tells no ports.
    { addresses: { localAddress: '/run/grpc.sock', remoteAddress: '' } }
  ]
  for (const connection of unnamed) {
    const label = JSON.stringify(connection) ?? 'no connection'
    t.equal(policies.peer.peerFor(connection), null, `${label}: peer refuses a client it cannot name`)
    t.equal(policies.local.peerFor(connection), null, `${label}: so does local`)
    t.equal(policies.any.peerFor(connection), undefined, `${label}: any lets it through`)
  }
  t.equal(new PeerPolicy().access, 'peer', 'peer is the default')
})

t.test('an identity the object\'s owner and mode refuse: nothing mapped, nothing registered, for any user', async (t) => {
  const registry = new Registry()
  t.teardown(() => registry.close())
  const key = makeObject(t, PAGE_SIZE, 'refused_identity')
  const { uid: owner, gid: group } = statSync(objectPath(key))
  // Never root (uid 0), who may open anything: the owner's uid plus one.
  const stranger = { uid: owner + 1, gids: [] }
  const fds = openFdCount()
  for (const mode of [0o600, 0o640, 0o604]) {
    chmodSync(objectPath(key), mode)
    t.throws(() => registry.register('r', { key, byteSize: 64, peer: stranger }),
      { name: 'TritonError', code: 'ERR_SHM_ACCESS_DENIED', kind: 'denied', message: DENIED('r', key) }, `${mode.toString(8)}: refused`)
  }
  t.same(mappingsOf(key), [], 'never mapped')
  t.equal(openFdCount(), fds, 'no descriptor left')
  t.same(registry.status(), [], 'nothing registered')
  t.equal(registry.counters().rejections.ERR_SHM_ACCESS_DENIED, 3, 'each refusal counted')
  chmodSync(objectPath(key), 0o660)
  registry.register('r', { key, byteSize: 64, peer: { ...stranger, gids: [group] } })
  t.ok(registry.has('r'), 'a member of its group may, with 0660')
  t.throws(() => registry.register('unnamed', { key, byteSize: 64, peer: null }), { code: 'ERR_SHM_PEER_UNKNOWN' },
    'a client the kernel cannot name is refused before the object is opened')
})

t.test('a second local user reaches only what it could open itself: HTTP, gRPC, each on TCP and a Unix socket; root reaches all', async (t) => {
  const user = peerUser(t, 'clients running as another local user')
  if (user === undefined) return
  const script = registerClient(t)
  const { rootPrivate, rootReadable, everyones, peersOwn } = objects(t, user)
  const app = await service(t)
  await app.listen({ host: '127.0.0.1', port: 0 })
  const { port } = app.server.address() as { port: number }
  const grpcAddress = `127.0.0.1:${app.tritonGrpc.port as number}`
  const socketDirectory = sharedScratch(t, 'peer-socket')
  const unixApp = Fastify()
  t.teardown(() => unixApp.close())
  // The plugin's gRPC listener on a socket of its own: a mode that lets the second user connect.
  const grpcSocketPath = path.join(socketDirectory, 'grpc.sock')
  await unixApp.register(fastifyTritonShm, { grpc: { path: grpcSocketPath, socketMode: 0o777 } })
  const socketPath = path.join(socketDirectory, 'api.sock')
  await unixApp.listen({ path: socketPath })
  chmodSync(socketPath, 0o777)

  const asPeer = { uid: user.uid, gid: user.gid }
  const overHttp = (name: string, key: string, runAs: RunAs = asPeer) =>
    registerFrom(script, ['http', '127.0.0.1', String(port), name, key, '64'], runAs)
  const overGrpc = (name: string, key: string, runAs: RunAs = asPeer) =>
    registerFrom(script, ['grpc', grpcAddress, '-', name, key, '64'], runAs)
  const overUnixSocket = (name: string, key: string, runAs: RunAs = asPeer) =>
    registerFrom(script, ['http', socketPath, '-', name, key, '64'], runAs)
  const overGrpcUnixSocket = (name: string, key: string, runAs: RunAs = asPeer) =>
    registerFrom(script, ['grpc', `unix://${grpcSocketPath}`, '-', name, key, '64'], runAs)

  t.test('root\'s private object (0600): refused, nothing mapped', async (t) => {
    t.same(await overHttp('private', rootPrivate), { status: 403, body: JSON.stringify({ error: DENIED('private', rootPrivate) }) }, 'HTTP: 403')
    t.same(await overGrpc('private', rootPrivate), { code: 7, details: DENIED('private', rootPrivate) }, 'gRPC: PERMISSION_DENIED')
    t.same(await overUnixSocket('private', rootPrivate), { status: 403, body: JSON.stringify({ error: DENIED('private', rootPrivate) }) },
      'Unix socket: 403 (SO_PEERCRED)')
    t.same(await overGrpcUnixSocket('private', rootPrivate), { code: 7, details: DENIED('private', rootPrivate) },
      'gRPC on a Unix socket: PERMISSION_DENIED (SO_PEERCRED)')
    t.same(mappingsOf(rootPrivate), [], 'never mapped')
    t.same(app.systemSharedMemory.status(), [], 'nothing registered')
    t.same(unixApp.systemSharedMemory.status(), [], 'nothing registered on the Unix sockets')
  })

  t.test('root\'s object others may only read (0644): refused, never mapped read-write', async (t) => {
    t.same(await overHttp('readable', rootReadable), { status: 403, body: JSON.stringify({ error: DENIED('readable', rootReadable) }) })
    t.same(await overGrpc('readable', rootReadable), { code: 7, details: DENIED('readable', rootReadable) })
    t.same(await overGrpcUnixSocket('readable', rootReadable), { code: 7, details: DENIED('readable', rootReadable) })
    t.same(mappingsOf(rootReadable), [], 'never mapped')
    t.same(app.systemSharedMemory.status(), [])
  })

  t.test('its own object, or one read-write for everyone: registered, as before', async (t) => {
    t.same(await overHttp('own', peersOwn), { status: 200, body: '' }, 'its own over HTTP')
    t.same(await overGrpc('own-grpc', peersOwn), { code: 0 }, 'its own over gRPC')
    t.same(await overUnixSocket('own-unix', peersOwn), { status: 200, body: '' }, 'its own over a Unix socket')
    t.same(await overHttp('everyones', everyones), { status: 200, body: '' }, 'read-write for all, over HTTP')
    t.same(await overGrpc('everyones-grpc', everyones), { code: 0 }, 'read-write for all, over gRPC')
    t.same(await overGrpcUnixSocket('own-grpc-unix', peersOwn), { code: 0 }, 'its own over gRPC on a Unix socket')
    t.same(app.systemSharedMemory.status().map(({ name }) => name), ['everyones', 'everyones-grpc', 'own', 'own-grpc'])
    t.same(unixApp.systemSharedMemory.status().map(({ name }) => name), ['own-grpc-unix', 'own-unix'])
    app.systemSharedMemory.unregisterAll()
    unixApp.systemSharedMemory.unregisterAll()
  })

  t.test('root: any object, over every transport', async (t) => {
    const asRoot = { uid: 0, gid: 0 }
    t.same(await overHttp('root-private', rootPrivate, asRoot), { status: 200, body: '' })
    t.same(await overGrpc('root-readable', rootReadable, asRoot), { code: 0 })
    t.same(await overUnixSocket('root-own', peersOwn, asRoot), { status: 200, body: '' })
    t.same(await overGrpcUnixSocket('root-private', rootPrivate, asRoot), { code: 0 }, 'gRPC on a Unix socket: root\'s own')
    app.systemSharedMemory.unregisterAll()
    unixApp.systemSharedMemory.unregisterAll()
  })

  t.test('each connection on the gRPC socket is its own client: root\'s, open before a second user\'s call, is still root\'s', async (t) => {
    const rootClient = new GrpcKServeClient(`unix://${grpcSocketPath}`)
    t.teardown(() => rootClient.close())
    t.same(await rootClient.systemSharedMemoryStatus(), [], 'root\'s connection open')
    t.same(await overGrpcUnixSocket('private', rootPrivate), { code: 7, details: DENIED('private', rootPrivate) }, 'the second user, on its own connection')
    await rootClient.registerSystemSharedMemory('root-after', rootPrivate, 64)
    t.same(unixApp.systemSharedMemory.status().map(({ name }) => name), ['root-after'], 'root, on its connection opened first')
    unixApp.systemSharedMemory.unregisterAll()
  })

  t.test('the host\'s own calls are not the client\'s: no rule applies', async (t) => {
    app.systemSharedMemory.register('host', { key: rootPrivate, byteSize: 64 })
    t.ok(app.systemSharedMemory.has('host'))
    app.systemSharedMemory.unregister('host')
  })

  t.test('clientShmAccess: "local" lets any client of this host name any object; "any" too', async (t) => {
    for (const access of ['local', 'any'] as const) {
      const open = await service(t, { clientShmAccess: access })
      await open.listen({ host: '127.0.0.1', port: 0 })
      const address = open.server.address() as { port: number }
      t.same(await registerFrom(script, ['http', '127.0.0.1', String(address.port), 'private', rootPrivate, '64'], asPeer),
        { status: 200, body: '' }, `${access}: root's private object, over HTTP`)
      t.same(await registerFrom(script, ['grpc', `127.0.0.1:${open.tritonGrpc.port as number}`, '-', 'readable', rootReadable, '64'], asPeer),
        { code: 0 }, `${access}: root's readable object, over gRPC`)
      await open.close()
    }
  })
})

t.test('a client the kernel cannot name (another network namespace) is refused, naming the option that opens it', async (t) => {
  const missing = noNetworkNamespaces()
  if (missing !== undefined) return cannotCheckHere(t, 'a client in another network namespace', missing)
  const namespace = otherNamespace(t)
  const script = registerClient(t)
  const key = makeObject(t, PAGE_SIZE, 'from_elsewhere')
  const fromElsewhere = async (access?: ClientShmAccess) => {
    const app = await service(t, access === undefined ? {} : { clientShmAccess: access })
    await app.listen({ host: namespace.hostAddress, port: 0 })
    const { port } = app.server.address() as { port: number }
    // Root in the other namespace: who it is does not matter, the kernel here cannot say.
    return registerFrom(script, ['http', namespace.hostAddress, String(port), 'far', key, '64'], { prefix: namespace.exec })
  }
  const refused = await fromElsewhere()
  t.equal(refused.status, 403)
  const { error } = JSON.parse(refused.body as string) as { error: string }
  t.match(error, /^cannot register shared memory region 'far': the connecting client's user cannot be found on this host/)
  t.match(error, /'clientShmAccess: "any"'/, 'the message names the option that opens it')
  t.same(mappingsOf(key), [], 'nothing mapped')
  t.equal((await fromElsewhere('local')).status, 403, 'local: still refused, the client is not on this host')
  t.same(await fromElsewhere('any'), { status: 200, body: '' }, 'any: registered, as Triton would')
})

t.test('the option is checked at registration', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await t.rejects(async () => { await app.register(fastifyTritonShm, { clientShmAccess: 'everyone' as ClientShmAccess }) },
    { code: 'ERR_SHM_INVALID_OPTION', message: "fastify-triton-shm: option 'clientShmAccess' must be equal to one of the allowed values" })
})

t.test('gRPC calls whose connection the server cannot tell (no connectionInterceptor; a host\'s own server on a Unix socket) are refused, never let through', async (t) => {
  const registry = new Registry()
  t.teardown(() => registry.close())
  const key = makeObject(t, PAGE_SIZE, 'no_interceptor')
  // A host's own server without connectionInterceptor: its handlers see no connection.
  const bare = grpcClient(t, await startServer(t, sharedMemoryService(registry), []))
  const refusal = await bare.fail('SystemSharedMemoryRegister', { name: 'r', key, byte_size: 64 })
  t.equal(refusal.code, status.PERMISSION_DENIED)
  t.match(refusal.details, /the connecting client's user cannot be found on this host/)
  // A host's own server on a Unix socket (grpc-js binds it): grpc-js tells no ends, and the server
  // does not know the socket. The plugin's listener does (test/unix-sockets.test.ts).
  const socketPath = path.join(sharedScratch(t, 'grpc-unix'), 'grpc.sock')
  const server = new Server({ interceptors: [connectionInterceptor()] })
  server.addService(inferenceService().service, sharedMemoryService(registry))
  await new Promise<void>((resolve, reject) => server.bindAsync(`unix:${socketPath}`, ServerCredentials.createInsecure(),
    (error) => (error === null ? resolve() : reject(error))))
  t.teardown(() => new Promise<void>((resolve) => server.tryShutdown(() => resolve())))
  const Client = inferenceService()
  const overUnix = new Client(`unix:${socketPath}`, credentials.createInsecure()) as unknown as Record<string, Function>
  t.teardown(() => (overUnix as unknown as { close(): void }).close())
  const unixRefusal = await new Promise<{ code: number }>((resolve) =>
    overUnix.SystemSharedMemoryRegister({ name: 'r', key, byte_size: 64 }, (error: { code: number }) => resolve(error)))
  t.equal(unixRefusal.code, status.PERMISSION_DENIED)
  t.same(registry.status(), [], 'nothing registered either way')
  // With the rule off, the same server registers.
  const open = grpcClient(t, await startServer(t, sharedMemoryService(registry, { clientShmAccess: 'any' }), []))
  await open.call('SystemSharedMemoryRegister', { name: 'r', key, byte_size: 64 })
  t.ok(registry.has('r'))
})
