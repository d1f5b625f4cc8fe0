/**
 * gRPC messages that cost the server far more than their bytes, each once a dead process or a
 * stall: typed contents and shapes of a hundred million one-byte zeros, compressed (127 KiB on
 * the wire) or not, sent over raw HTTP/2 to the example service in a child process with a small
 * V8 heap. What must hold: every call is answered with a status, the process lives, and its peak
 * memory stays within a small multiple of the bytes it was sent.
 */
import { status } from '@grpc/grpc-js'
import t from 'tap'
import { delimited, framed, type RawAnswer, rawGrpc } from './helpers/raw-grpc'
import { startServiceProcess } from './helpers/service-process'
import { bounded } from './helpers/sync'

const MiB = 1024 ** 2
/** Small enough that a decoder making an object per element dies within seconds. */
const HEAP_MIB = 256

/** A ModelInferRequest for identity_fp32 whose one input has `count` elements, each a one-byte
 * zero, packed: as typed `int64_contents` (shape [count]), or as the shape itself. */
function zerosRequest (count: number, where: 'int64_contents' | 'shape'): Buffer {
  const zeros = Buffer.alloc(count)
  const input = where === 'shape'
    ? Buffer.concat([delimited(1, 'INPUT0'), delimited(2, 'FP32'), delimited(3, zeros)])
    : Buffer.concat([delimited(1, 'INPUT0'), delimited(2, 'FP32'), delimited(3, Buffer.from([0x80, 0x80, 0x80, 0x40])),
      delimited(5, delimited(3, zeros))])
  return Buffer.concat([delimited(1, 'identity_fp32'), delimited(5, input)])
}

const answered = (answer: RawAnswer) => answer.status !== undefined && answer.status !== status.OK && answer.status !== status.UNKNOWN

t.test('128 Mi one-byte zeros in 127 KiB of gzip: refused with a status, the service lives, its memory bounded', async (t) => {
  const service = startServiceProcess(t, HEAP_MIB)
  const port = await service.grpcPort()
  const grpc = rawGrpc(t, port)
  const before = service.peakRss()
  for (const where of ['int64_contents', 'shape'] as const) {
    const body = framed(zerosRequest(128 * MiB, where), 'gzip')
    t.ok(body.length < 160 * 1024, `${where}: ${Math.round(body.length / 1024)} KiB on the wire`)
    const answer = await bounded(grpc.call('ModelInfer', body, { compression: 'gzip' }), `${where}: no answer (${service.exit ?? 'alive'})`)
    t.ok(answered(answer), `${where}: answered ${JSON.stringify(answer)}${answered(answer) ? '' : `; ${await service.fate()}`}`)
  }
  t.ok(service.alive, 'the service lives')
  const grown = service.peakRss() - before
  t.ok(grown < 400 * MiB, `its peak memory grew by ${Math.round(grown / MiB)} MiB`)
})

t.test('16 Mi one-byte zeros in 16 KiB of gzip: refused before they are decoded, the memory at most 4 times the inflated message', async (t) => {
  const service = startServiceProcess(t, HEAP_MIB)
  const port = await service.grpcPort()
  const grpc = rawGrpc(t, port)
  const count = 16 * MiB
  const before = service.peakRss()
  const answer = await bounded(grpc.call('ModelInfer', framed(zerosRequest(count, 'int64_contents'), 'gzip'), { compression: 'gzip' }),
    `no answer (${service.exit ?? 'alive'})`)
  t.equal(answer.status, status.INVALID_ARGUMENT)
  t.match(answer.details, /^the ModelInferRequest message of \d+ bytes would take \d+ bytes once decoded/, 'too costly decoded, for a compressed message')
  const grown = service.peakRss() - before
  // Inflated once into a buffer of its size (its measure's chunks dropped as it goes), never decoded.
  t.ok(grown < 4 * count, `its peak memory grew by ${Math.round(grown / MiB)} MiB (grpc-js's own inflation and the decoding took 160)`)
})

t.test('8 Mi and 64 Mi one-byte zeros, uncompressed: answered, the memory a small multiple of the message', async (t) => {
  const service = startServiceProcess(t, HEAP_MIB)
  const port = await service.grpcPort()
  const grpc = rawGrpc(t, port)
  for (const count of [8 * MiB, 64 * MiB]) {
    for (const where of ['int64_contents', 'shape'] as const) {
      const before = service.peakRss()
      const answer = await bounded(grpc.call('ModelInfer', framed(zerosRequest(count, where))), `${count} ${where}: no answer (${service.exit ?? 'alive'})`)
      t.ok(answered(answer), `${count / MiB} Mi zeros as ${where}: answered ${JSON.stringify(answer)}` +
        `${answered(answer) ? '' : `; ${await service.fate()}`}`)
      const grown = service.peakRss() - before
      // The message is held once received and once more while grpc-js frames it; its decoded form
      // takes at most 8 bytes per element.
      t.ok(grown < 10 * count + 64 * MiB, `${count / MiB} Mi zeros as ${where}: peak memory grew by ${Math.round(grown / MiB)} MiB`)
    }
  }
  t.ok(service.alive, 'the service lives')
})
