/**
 * Many infer requests pipelined on one connection: each is ended by the connection's close, through
 * one listener on the socket, so none piles up (Node warns past 10 listeners of one event).
 */
import { connect } from 'node:net'
import { once } from 'node:events'
import t from 'tap'
import { buildInferApp, echoModel, jsonInput, type TestModel } from './helpers/kserve'
import { listenLocally } from './helpers/slow-client'
import { Gate } from './helpers/sync'

const PIPELINED = 20

t.test(`${PIPELINED} requests pipelined on one connection add no listener per request`, async (t) => {
  const warnings: Error[] = []
  const onWarning = (warning: Error) => { warnings.push(warning) }
  process.on('warning', onWarning)
  t.teardown(() => process.off('warning', onWarning))
  const echo = echoModel('m', ['INT32'])
  const gate = new Gate(false)
  const held: TestModel = { signature: echo.signature, async execute (infer) { await gate.pass(); echo.execute(infer) } }
  const { app } = await buildInferApp(t, [held])
  const port = await listenLocally(t, app)
  const body = JSON.stringify({ inputs: [jsonInput('IN_INT32', 'INT32', [1], [7])] })
  const request = `POST /v2/models/m/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`
  const socket = connect(port, '127.0.0.1')
  t.teardown(() => socket.destroy())
  await once(socket, 'connect')
  socket.write(request.repeat(PIPELINED))
  let received = ''
  socket.on('data', (chunk: Buffer) => { received += chunk.toString() })
  await gate.untilHeld(PIPELINED, 'the pipelined requests never all reached their model')
  gate.open()
  while ((received.match(/HTTP\/1\.1 200/g) ?? []).length < PIPELINED) await once(socket, 'data')
  // Only this warning is the code's: a test runner's loader may warn of its own deprecations.
  t.same(warnings.filter(({ name }) => name === 'MaxListenersExceededWarning'), [], 'no listener warning')
})
