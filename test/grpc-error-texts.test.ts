/**
 * An error whose text echoes what the client sent (a model name, a shape) is answered over gRPC
 * however long that was: its text is cut to what a status trailer carries, Triton's words kept at
 * both ends. Before, a trailer past HTTP/2's header limit was never sent: the call waited for its
 * deadline, and so did the next call on the same connection.
 */
import { status } from '@grpc/grpc-js'
import t from 'tap'
import { statusDetails } from '../lib/grpc/status'
import { grpcClient, listenGrpcPlugin } from './helpers/grpc'
import { sumModel } from './helpers/kserve'
import { bounded } from './helpers/sync'

t.test('an error echoing a huge name or shape is answered, cut to what a trailer carries, and the connection serves on', async (t) => {
  const { port } = await listenGrpcPlugin(t, [sumModel()])
  const client = grpcClient(t, port)
  const answeredWithin = async (method: string, request: object) =>
    await bounded(client.fail(method, request), `${method} was never answered`, 10_000)
  for (const name of ['a'.repeat(1_000_000), 'é'.repeat(30_000)]) {
    const error = await answeredWithin('ModelConfig', { name })
    t.equal(error.code, status.NOT_FOUND, `a ${name.length}-character name: NOT_FOUND`)
    t.ok(error.details.length < 4096, `in ${error.details.length} characters`)
    t.match(error.details, /^Request for unknown model: '(a|é){100}.*' is not found$/, 'Triton\'s text, the name\'s start echoed')
    t.same(await client.call('ModelConfig', { name: 'simple' }), { config: (await client.call('ModelConfig', { name: 'simple' })).config },
      'the next call on the connection is answered')
  }
  const shape = new Array(60_000).fill(1)
  const error = await answeredWithin('ModelInfer', {
    model_name: 'simple', inputs: ['INPUT0', 'INPUT1'].map((name) => ({ name, datatype: 'INT32', shape }))
  })
  t.equal(error.code, status.INVALID_ARGUMENT, 'a 60 000-dimension shape: INVALID_ARGUMENT')
  t.ok(error.details.length < 4096, `in ${error.details.length} characters`)
  t.match(error.details, /^unexpected shape for input 'INPUT0' for model 'simple'\. Expected \[-1,16\], got \[1,1,1,.*,1,1\]$/)
  t.same(await client.call('ServerLive'), { live: true }, 'and the connection serves on')
})

t.test('statusDetails: whole when it fits; else start and end, within 2 KiB once percent-encoded', async (t) => {
  t.equal(statusDetails("Request for unknown model: 'x' is not found"), "Request for unknown model: 'x' is not found")
  for (const text of ['a'.repeat(5000), 'é'.repeat(3000), '😀'.repeat(3000), `${'a'.repeat(1535)}${'😀'.repeat(1000)}${'\ud800'.repeat(10)}`]) {
    const details = statusDetails(text)
    t.ok(encodeURI(details).length <= 2048, `${text.length} characters: ${encodeURI(details).length} bytes encoded`)
    t.match(details, /\.\.\.\(\d+ characters not shown\)\.\.\./)
  }
  t.equal(statusDetails('a\ud800b'), 'a\ufffdb', 'a lone surrogate, which cannot be encoded, is replaced')
})
