/**
 * A tensor's elements handed from one request to another (an ensemble's steps): as wire bytes,
 * and copied into output storage, from each form a request holds them in.
 */
import t from 'tap'
import { parseBytesTensor } from '../lib/index'
import { copyTensorData, tensorDataBytes } from '../lib/kserve/tensor-data'
import { serializeStrings } from './helpers/kserve'

t.test('wire bytes and copies of typed arrays, BYTES inputs and BYTES outputs', async (t) => {
  const serialized = serializeStrings(['ab', '', 'c'])
  const input = parseBytesTensor('IN', serialized, 3)
  const output = [Buffer.from('ab'), Buffer.alloc(0), Buffer.from('c')]
  const numbers = Int16Array.of(1, -2, 3)

  t.equal(tensorDataBytes(input), input.serialized, 'a BYTES input: its serialized bytes, not copied')
  t.same(Buffer.from(tensorDataBytes(output)), serialized, 'a BYTES output: serialized')
  const raw = tensorDataBytes(numbers)
  t.equal(raw.buffer, numbers.buffer, 'a typed array: its own bytes')
  t.same([...raw], [1, 0, 254, 255, 3, 0])

  const fromInput: Buffer[] = Array(3).fill(Buffer.alloc(0))
  copyTensorData(input, fromInput)
  t.same(fromInput.map(String), ['ab', '', 'c'])
  const fromOutput: Buffer[] = Array(3).fill(Buffer.alloc(0))
  copyTensorData(output, fromOutput)
  t.equal(fromOutput[0], output[0], 'a BYTES output\'s elements are shared')
  const copied = new Int16Array(3)
  copyTensorData(numbers, copied)
  t.same([...copied], [1, -2, 3])
})
