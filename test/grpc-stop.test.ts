/**
 * SIGTERM to the example service while a gRPC client holds an answer it stopped reading, and
 * another holds a call whose message it never finished: the service stops in bounded time (its
 * send timeout, 30 s), instead of living as long as those clients do.
 */
import t from 'tap'
import { inferenceService } from '../lib/grpc'
import { holdCallsOpen, rawGrpc } from './helpers/raw-grpc'
import { startServiceProcess } from './helpers/service-process'
import { makeObject } from './helpers/shm'
import { bounded } from './helpers/sync'

const MiB = 1024 ** 2
const SEND_TIMEOUT_MS = 30_000

t.test('SIGTERM while gRPC clients hold their calls open: the service stops within its send timeout', async (t) => {
  const service = startServiceProcess(t, 512)
  const [port, baseUrl] = [await service.grpcPort(), await service.baseUrl()]
  const byteSize = 32 * MiB
  const key = makeObject(t, byteSize, 'grpc_stop')
  const registered = await fetch(`${baseUrl}/v2/systemsharedmemory/region/in/register`, {
    method: 'POST', body: JSON.stringify({ key, offset: 0, byte_size: byteSize })
  })
  t.equal(registered.status, 200, 'a 32 MiB region registered')
  const request = (inferenceService().service.ModelInfer.requestSerialize as (value: object) => Buffer)({
    model_name: 'identity_fp32',
    inputs: [{
      name: 'INPUT0',
      datatype: 'FP32',
      shape: [1, byteSize / 4],
      parameters: { shared_memory_region: { string_param: 'in' }, shared_memory_byte_size: { int64_param: byteSize } }
    }]
  })
  const { stalled } = await holdCallsOpen(rawGrpc(t, port), request)
  const signalled = Date.now()
  service.child.kill('SIGTERM')
  await bounded(service.exited, 'the service never stopped', 3 * SEND_TIMEOUT_MS)
  const took = Date.now() - signalled
  t.ok(took < SEND_TIMEOUT_MS + 15_000, `it stopped ${took} ms after SIGTERM (${service.exit})`)
  t.equal(service.exit, 'code 0', 'cleanly')
  t.not((await stalled).status, 0, 'the stalled reader never got its whole answer')
})
