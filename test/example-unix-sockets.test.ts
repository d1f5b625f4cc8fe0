/**
 * The example service on Unix domain sockets (HTTP_SOCKET, GRPC_SOCKET), in a process of its own:
 * instead of its ports when none is given, beside them when they are, the example client's flows
 * checked over both, and the socket files removed when it stops.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import t, { type Test } from 'tap'
import { randomSuffix, runClient } from '../example/client'
import { startServiceProcess } from './helpers/service-process'
import { removeLeftoversOnTeardown } from './helpers/shm'
import { PATIENCE_MS, whenEvent } from './helpers/sync'

function sockets (t: Test) {
  const directory = mkdtempSync(path.join(tmpdir(), 'fts-example-unix-'))
  t.teardown(() => rmSync(directory, { recursive: true, force: true }))
  return { HTTP_SOCKET: path.join(directory, 'http.sock'), GRPC_SOCKET: path.join(directory, 'grpc.sock') }
}

/** Runs the example client's flows over both sockets; fails the test on any wrong result. */
async function flowsOverSockets (t: Test, { HTTP_SOCKET, GRPC_SOCKET }: ReturnType<typeof sockets>) {
  const suffix = randomSuffix()
  removeLeftoversOnTeardown(t, suffix)
  const { ok, transcript } = await runClient('http://localhost', { keySuffix: suffix, socketPath: HTTP_SOCKET, grpcAddress: `unix://${GRPC_SOCKET}` })
  t.equal(ok, true, transcript.join('\n'))
  t.equal(transcript.filter((line) => line.startsWith('ok ')).length, 10, 'simple, simple_string and tiny_classifier over each transport')
}

t.test('HTTP_SOCKET and GRPC_SOCKET alone: the sockets instead of the ports, removed at stop', async (t) => {
  const paths = sockets(t)
  const service = startServiceProcess(t, 256, { ...paths, PORT: undefined, GRPC_PORT: undefined })
  await whenEvent(service, 'line', () => service.lines.some((line) => line.msg === `Server listening at ${paths.HTTP_SOCKET}`) || !service.alive,
    `the service never listened on its socket\n${service.other}`, 5 * PATIENCE_MS)
  const grpc = service.lines.find((line) => line.msg === 'KServe gRPC listening') as { port?: number, path?: string }
  t.same({ port: grpc.port, path: grpc.path }, { port: undefined, path: paths.GRPC_SOCKET }, 'gRPC on its socket, no port')
  t.notOk(service.lines.some((line) => /^Server listening at http:/.test(line.msg)), 'HTTP on no port')
  await flowsOverSockets(t, paths)
  service.child.kill('SIGTERM')
  await service.exited
  t.equal(service.exit, 'code 0')
  t.notOk(existsSync(paths.HTTP_SOCKET) || existsSync(paths.GRPC_SOCKET), 'both socket files removed')
})

t.test('beside the ports when they are given', async (t) => {
  const paths = sockets(t)
  const service = startServiceProcess(t, 256, paths)
  const baseUrl = await service.baseUrl()
  await service.grpcPort()
  await whenEvent(service, 'line', () => service.lines.some((line) => line.msg === `Server listening at ${paths.HTTP_SOCKET}`) || !service.alive,
    `the service never listened on its HTTP socket\n${service.other}`, 5 * PATIENCE_MS)
  await flowsOverSockets(t, paths)
  const grpcPort = await service.grpcPort()
  const suffix = randomSuffix()
  removeLeftoversOnTeardown(t, suffix)
  const overPorts = await runClient(baseUrl, { keySuffix: suffix, grpcAddress: `127.0.0.1:${grpcPort}` })
  t.equal(overPorts.ok, true, overPorts.transcript.join('\n'))
  service.child.kill('SIGTERM')
  await service.exited
  t.notOk(existsSync(paths.HTTP_SOCKET) || existsSync(paths.GRPC_SOCKET), 'both socket files removed')
})
