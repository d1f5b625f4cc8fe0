/**
 * The example service traced as L0_trace's test.sh starts tritonserver (`--trace-config
 * triton,file=...`, `level=TIMESTAMPS`, `rate=1`), as a real child process: requests to `simple`
 * over HTTP and gRPC, then SIGTERM, and the file is what Triton's trace_summary.py reads. Triton's
 * format, checked for itself: one JSON array; per request one description and one object per
 * instant, each with its id; the instants the summary needs (a face's start and end, and the
 * table's REQUEST_START to REQUEST_END) in the order they happened.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import t from 'tap'
import { grpcClient } from './helpers/grpc'
import { startServiceProcess } from './helpers/service-process'
import { bounded } from './helpers/sync'
import { int32Bytes } from './helpers/stream'

const data = [...Array(16).keys()]

interface TraceObject { id: number, model_name?: string, model_version?: number, timestamps?: Array<{ name: string, ns: number }> }

t.test('L0_trace\'s server options: the file is Triton\'s JSON array of each request\'s objects, completed at SIGTERM', async (t) => {
  const made = mkdtempSync(path.join(tmpdir(), 'example-traces-'))
  t.teardown(() => rmSync(made, { recursive: true, force: true }))
  const file = path.join(made, 'trace_off_to_min.log')
  const service = startServiceProcess(t, 256, {}, ['--trace-config', `triton,file=${file}`, '--trace-config', 'level=TIMESTAMPS', '--trace-config', 'rate=1'])
  const baseUrl = await service.baseUrl()
  const grpc = grpcClient(t, await service.grpcPort())
  const inputs = [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16] }, { name: 'INPUT1', datatype: 'INT32', shape: [1, 16] }]
  const answer = await fetch(`${baseUrl}/v2/models/simple/infer`, { method: 'POST', body: JSON.stringify({ inputs: inputs.map((input) => ({ ...input, data })) }) })
  t.equal(answer.status, 200)
  await answer.text()
  await grpc.call('ModelInfer', { model_name: 'simple', inputs, raw_input_contents: [int32Bytes(data), int32Bytes(data)] })
  service.child.kill('SIGTERM')
  await bounded(service.exited, 'the service stopping')
  t.equal(service.exit, 'code 0')

  const objects = JSON.parse(readFileSync(file, 'utf8')) as TraceObject[]
  t.ok(Array.isArray(objects), 'one JSON array')
  t.same([...new Set(objects.map(({ id }) => id))], [1, 2], 'each request\'s objects under its id')
  for (const [id, face] of [[1, 'HTTP'], [2, 'GRPC']] as const) {
    const own = objects.filter((object) => object.id === id)
    t.same(own.filter(({ model_name: name }) => name !== undefined), [{ id, model_name: 'simple', model_version: 1 }], `${face}: its description`)
    const instants = own.flatMap(({ timestamps }) => timestamps ?? [])
    t.ok(own.every(({ model_name: name, timestamps }) => name !== undefined || timestamps?.length === 1), 'one instant an object')
    const names = instants.map(({ name }) => name)
    const needed = face === 'HTTP'
      ? ['HTTP_RECV_START', 'HTTP_RECV_END', 'HTTP_SEND_START', 'HTTP_SEND_END']
      : ['GRPC_WAITREAD_START', 'GRPC_WAITREAD_END', 'GRPC_SEND_START', 'GRPC_SEND_END']
    for (const name of [...needed, 'REQUEST_START', 'QUEUE_START', 'COMPUTE_START', 'COMPUTE_INPUT_END', 'COMPUTE_OUTPUT_START', 'COMPUTE_END', 'REQUEST_END']) {
      t.equal(names.filter((each) => each === name).length, 1, `${face}: ${name}`)
    }
    const at = (name: string) => (instants.find((instant) => instant.name === name) as { ns: number }).ns
    t.ok(at(needed[0]) <= at('REQUEST_START') && at('REQUEST_START') <= at('COMPUTE_START') && at('COMPUTE_START') <= at('COMPUTE_END') &&
      at('COMPUTE_END') <= at('REQUEST_END') && at('REQUEST_END') <= at(needed[3]), `${face}: in the order they happened`)
  }
})
