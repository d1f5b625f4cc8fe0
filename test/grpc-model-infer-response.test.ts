/**
 * The package's own ModelInferResponse writer against proto-loader's: the same bytes for any
 * response fast-check makes (texts in any script or empty, shapes empty or with zeros, negatives
 * and dimensions up to 2^53, outputs in shared memory or raw), behind gRPC's 5-byte prefix, its
 * length known before the message is written.
 */
import { loadSync } from '@grpc/proto-loader'
import fc from 'fast-check'
import t from 'tap'
import { GRPC_LOADER_OPTIONS, PROTO_PATH } from '../lib/grpc'
import { ModelInferResponseFrame } from '../lib/grpc/model-infer-response'
import type { ModelInferResponse } from '../types/grpc'

type Codec = { responseSerialize: (value: object) => Buffer, responseDeserialize: (bytes: Buffer) => unknown }
const theirs = (loadSync(PROTO_PATH, GRPC_LOADER_OPTIONS)['inference.GRPCInferenceService'] as unknown as Record<string, Codec>).ModelInfer

const text = fc.string({ maxLength: 8, unit: 'grapheme' })
const dimension = fc.oneof(fc.nat(300), fc.integer({ min: -(2 ** 53) + 1, max: 2 ** 53 - 1 }), fc.constantFrom(0, -1, 127, 128, 2 ** 32, 2 ** 53 - 1))
const response: fc.Arbitrary<ModelInferResponse> = fc.record({
  model_name: text,
  model_version: text,
  id: text,
  outputs: fc.array(fc.record({ name: text, datatype: text, shape: fc.array(dimension, { maxLength: 4 }) }), { maxLength: 3 }),
  raw_output_contents: fc.array(fc.uint8Array({ maxLength: 300 }), { maxLength: 3 })
})

t.test('the bytes proto-loader writes, behind a prefix of their length', async (t) => {
  fc.assert(fc.property(response, (answer) => {
    const frame = new ModelInferResponseFrame(answer)
    const written = frame.write()
    const expected = theirs.responseSerialize(answer)
    const same = frame.messageBytes === expected.length && written.length === expected.length + 5 &&
      written[0] === 0 && written.readUInt32BE(1) === expected.length && written.subarray(5).equals(expected)
    if (!same) t.same(written.subarray(5).toString('hex'), expected.toString('hex'), 'the messages differ')
    return same
  }), { numRuns: 300 })
})

t.test('a response in shared memory: its outputs described, no raw bytes', async (t) => {
  const answer = {
    model_name: 'simple',
    model_version: '1',
    id: '',
    outputs: [{ name: 'OUTPUT0', datatype: 'INT32', shape: [1, 16] }],
    raw_output_contents: []
  }
  const frame = new ModelInferResponseFrame(answer)
  t.same(theirs.responseDeserialize(frame.write().subarray(5)), {
    ...answer, parameters: {}, outputs: [{ ...answer.outputs[0], shape: ['1', '16'], parameters: {}, contents: null }]
  }, 'read back by proto-loader')
})
