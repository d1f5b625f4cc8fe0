/**
 * The logging extension across the processes of a service that share a registry: a change made
 * through one process is what every other answers, over either transport, and what its logger
 * writes, applied at the store's next check in a process that serves no logging call; a process
 * that starts later starts from the change. This process is one of them (a Fastify app on the
 * store), test/fixtures/logging-peer.ts the others.
 */
import path from 'node:path'
import Fastify, { type FastifyInstance } from 'fastify'
import t, { type Test } from 'tap'
import fastifyTritonShm, { kserveModels, ModelTable, Registry, ServerLogging } from '../lib/index'
import { type CommandChild, startCommandChild } from './helpers/command-child'
import { grpcClient } from './helpers/grpc'
import { LogCapture } from './helpers/observe'
import { storePath } from './helpers/registry-peer'
import { bounded } from './helpers/sync'

const PEER = path.join(__dirname, 'fixtures', 'logging-peer.ts')

interface Peer extends CommandChild {
  call<T = unknown> (command: object): Promise<T>
}

async function startPeer (t: Test, store: string): Promise<Peer> {
  const child = await startCommandChild(t, PEER, [store], 'the logging peer process')
  return {
    ...child,
    call: async <T>(command: object) => {
      const reply = await child.send(command)
      if (reply.error !== undefined) throw new Error(reply.error)
      return reply.result as T
    }
  }
}

/** This process's app on the store, its logger writing to `capture`. */
async function serveHere (t: Test, store: string, capture: LogCapture): Promise<FastifyInstance> {
  const app = Fastify({ logger: { level: 'info', stream: capture.stream } })
  t.teardown(() => app.close())
  const logging = new ServerLogging(app.log)
  const table = new ModelTable([])
  await app.register(fastifyTritonShm, { sharedRegistry: { path: store, checkIntervalMs: 50 }, grpc: { port: 0, models: table, logging } })
  await app.register(kserveModels, { models: table, logging })
  await app.listen({ host: '127.0.0.1', port: 0 })
  return app
}

const url = (port: number) => `http://127.0.0.1:${port}/v2/logging`

async function settingsAt (port: number, body?: object): Promise<Record<string, unknown>> {
  const response = await fetch(url(port), body === undefined ? {} : { method: 'POST', body: JSON.stringify(body) })
  if (response.status !== 200) throw new Error(`${response.status}: ${await response.text()}`)
  return await response.json() as Record<string, unknown>
}

/** Resolves at the first check of the store after which the app's logger is at `level` (the
 * extension applies the store's settings at each check, before this listener runs). */
function levelAtCheck (app: FastifyInstance, level: string): Promise<void> {
  const store = (app.systemSharedMemory as Registry).modelStore()
  return bounded(new Promise((resolve) => store.onCheck(() => { if (app.log.level === level) resolve() })), `the logger at ${level}`)
}

t.test('a change through one process is every process\'s, in its answers and its logger', async (t) => {
  const store = storePath(t)
  const capture = new LogCapture()
  const app = await serveHere(t, store, capture)
  const here = (app.server.address() as { port: number }).port
  const peer = await startPeer(t, store)
  const ports = await peer.call<{ http: number, grpc: number }>({ op: 'ports' })

  t.same(await settingsAt(ports.http), await settingsAt(here), 'the same settings before any change')
  const changed = await settingsAt(here, { log_info: false })
  t.equal(changed.log_info, false)
  t.same(await settingsAt(ports.http), changed, 'the peer answers the change made here')
  t.equal(await peer.call({ op: 'level' }), 'warn', 'and its logger follows')
  t.equal(await peer.call({ op: 'log', level: 'info', msg: 'peer info' }), false, 'the peer writes no info line')
  t.equal(await peer.call({ op: 'log', level: 'warn', msg: 'peer warning' }), true)

  // A change through the peer, over gRPC: this process serves no logging call, and takes it at the
  // store's next check.
  const atCheck = levelAtCheck(app, 'debug')
  const grpc = grpcClient(t, ports.grpc)
  await grpc.call('LogSettings', { settings: { log_verbose_level: { uint32_param: 1 } } })
  await atCheck
  app.log.debug('debug here')
  t.equal(capture.withMessage('debug here').length, 1, 'this process writes debug lines now')
  app.log.info('info here')
  t.equal(capture.withMessage('info here').length, 1, 'verbose 1 is debug: pino lets info through')
  t.same(await settingsAt(here), { ...changed, log_verbose_level: 1 })

  const later = await startPeer(t, store)
  const laterPorts = await later.call<{ http: number, grpc: number }>({ op: 'ports' })
  t.same(await settingsAt(laterPorts.http), { ...changed, log_verbose_level: 1 }, 'a process that starts later starts from the change')
  t.equal(await later.call({ op: 'level' }), 'debug')
})

t.test('a refused change reaches no process', async (t) => {
  const store = storePath(t)
  const app = await serveHere(t, store, new LogCapture())
  const here = (app.server.address() as { port: number }).port
  const peer = await startPeer(t, store)
  const ports = await peer.call<{ http: number, grpc: number }>({ op: 'ports' })
  const refused = await fetch(url(here), { method: 'POST', body: JSON.stringify({ log_info: false, log_format: 'json' }) })
  t.equal(refused.status, 400)
  t.same(await settingsAt(ports.http), await settingsAt(here))
  t.equal((await settingsAt(ports.http)).log_info, true)
  t.equal(await peer.call({ op: 'level' }), 'info')
})
