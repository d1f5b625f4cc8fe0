/**
 * Stops under load, fuzzed: how many apps share a registry, how many inferences are in flight,
 * whether their region was unregistered meanwhile, the order the apps close in, and when the
 * inferences go on, all drawn by fast-check. The property (test/helpers/stops.ts): every inference
 * in flight is answered 200 with its result, and nothing is left beside the store or mapped.
 */
import fc from 'fast-check'
import t from 'tap'
import { makeMappedObject } from './helpers/kserve'
import { openFdCount, shmMappings } from './helpers/shm'
import { stopUnderLoad } from './helpers/stops'

const RUNS = 60

const scenario = fc.integer({ min: 1, max: 4 }).chain((apps) => fc.record({
  apps: fc.constant(apps),
  inFlight: fc.integer({ min: 0, max: 6 }),
  closeOrder: fc.shuffledSubarray([...Array(apps).keys()], { minLength: apps, maxLength: apps }),
  unregisterFirst: fc.boolean(),
  releaseAfter: fc.integer({ min: 0, max: apps })
}))

t.test(`${RUNS} random stops under load: every inference in flight answered, nothing left`, async (t) => {
  const input = makeMappedObject(t, 128, 'fuzz_stops')
  new Int32Array(input.bytes.buffer, input.bytes.byteOffset, 32).set([...Array(16).keys(), ...Array(16).fill(1)])
  const fds = openFdCount()
  const mappings = shmMappings()
  await fc.assert(fc.asyncProperty(scenario, async (drawn) => {
    const problems = await stopUnderLoad(drawn, input.key)
    if (problems.length > 0) throw new Error(problems.join('; '))
  }), { numRuns: RUNS })
  t.equal(openFdCount(), fds, 'as many descriptors as before')
  t.same(shmMappings(), mappings, 'the same /dev/shm mappings as before')
})
