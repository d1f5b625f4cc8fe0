/**
 * The gRPC listener's send timeout, over real connections on 127.0.0.1: the clock runs only
 * while an answer waits on its client. A stream that has sent all it has stays open however long
 * it waits; a client that stops reading is dropped; no call's watch outlives it.
 */
import t from 'tap'
import { pendingChecks } from '../lib/util/periodic-checks'
import { grpcClient, listenGrpcPlugin } from './helpers/grpc'
import { echoModel } from './helpers/kserve'
import { echoRegion, framed, rawGrpc } from './helpers/raw-grpc'
import { streamClient } from './helpers/stream'
import { bounded } from './helpers/sync'

const MiB = 1024 ** 2
const echo = echoModel('echo', ['UINT8'])

const echoOf = (id: string) => ({
  model_name: 'echo',
  id,
  inputs: [{ name: 'IN_UINT8', datatype: 'UINT8', shape: [4] }],
  raw_input_contents: [Buffer.from([1, 2, 3, 4])]
})

t.test('a stream that has sent all it has stays open past the send timeout, while a client that stops reading is dropped', async (t) => {
  const sendTimeoutMs = 300
  const { app, port } = await listenGrpcPlugin(t, [echo], { grpc: { limits: { sendTimeoutMs } } })
  const stream = streamClient(t, port)
  stream.write(echoOf('first'))
  await stream.until(1)
  // A witness: its answer, far larger than a socket holds, waits on a client that reads none of
  // it. It is dropped a send timeout after it stalled, which began after the stream's answer went
  // out: a watch on the stream's answer would have fired first.
  const stalled = await bounded(rawGrpc(t, port).call('ModelInfer', framed(await echoRegion(t, app, 32 * MiB)), { stopReadingAfter: 1 }),
    'the stalled call was never dropped', 40 * sendTimeoutMs)
  t.ok(stalled.received < 32 * MiB, `the stalled call got ${stalled.received} bytes of its answer, then was dropped`)
  stream.write(echoOf('second'))
  const answers = await stream.until(2)
  t.same(answers.map(({ error_message: message, infer_response: response }) => [message, response.id]), [['', 'first'], ['', 'second']],
    'the stream, idle meanwhile, answers on')
})

t.test('every call\'s watches end with its stream, whoever serves it', async (t) => {
  const { port } = await listenGrpcPlugin(t, [echo])
  const client = grpcClient(t, port)
  t.same(await client.call('ServerLive'), { live: true }, 'a call grpc-js serves')
  t.equal(pendingChecks(), 0, 'no watch after it')
  const answer = await client.call('ModelInfer', echoOf('unary')) as { id: string }
  t.equal(answer.id, 'unary', 'a ModelInfer the listener serves on its stream')
  t.equal(pendingChecks(), 0, 'no watch after it either')
})
