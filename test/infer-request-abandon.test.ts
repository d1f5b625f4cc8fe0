/**
 * A request abandoned by its client (`abandon()`): its signal aborts with the reason, whether it
 * was read before or after (it is made when first read), `throwIfAbandoned()` throws the same
 * reason, the first reason stays, and a request whose leases have ended is not abandoned. Listeners
 * of `onAbandoned()` are told once, with the same reason, unless they stopped listening; one that
 * comes after the abandonment is told at once.
 */
import t from 'tap'
import { InferRequest, Registry } from '../lib/index'
import type { InferRequestWire, ModelSignature } from '../types'

const model: ModelSignature = { name: 'echo', inputs: [{ name: 'X', datatype: 'INT32', shape: [-1] }], outputs: [{ name: 'Y', datatype: 'INT32', shape: [-1] }] }
const wire: InferRequestWire = { inputs: [{ name: 'X', datatype: 'INT32', shape: [2], data: [1, 2] }] }
/** What `run` throws; undefined if it returns. */
function thrownBy (run: () => void): unknown {
  try {
    run()
  } catch (error) {
    return error
  }
  return undefined
}

const request = () => new InferRequest(structuredClone(wire), Buffer.alloc(0), { registry: new Registry(), model })

t.test('a signal read before the abandonment aborts with its reason; throwIfAbandoned throws it', async (t) => {
  const infer = request()
  const signal = infer.signal
  const aborted = new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }))
  t.equal(signal.aborted, false)
  infer.throwIfAbandoned()
  t.pass('nothing thrown while the client is there')
  infer.abandon()
  await aborted
  t.match(signal.reason, { kind: 'cancelled' })
  t.throws(() => infer.throwIfAbandoned(), signal.reason)
  infer.release()
})

t.test('a signal first read after the abandonment is aborted already, with the first reason', async (t) => {
  const infer = request()
  const first = new Error('its stream stopped')
  infer.abandon(first)
  infer.abandon(new Error('a later reason'))
  t.throws(() => infer.throwIfAbandoned(), first)
  t.equal(infer.signal.aborted, true)
  t.equal(infer.signal.reason, first, 'the first reason stays')
  t.equal(infer.signal, infer.signal, 'one signal, made once')
  infer.release()
})

t.test('a request whose leases ended is not abandoned', async (t) => {
  const infer = request()
  infer.release()
  infer.abandon()
  infer.throwIfAbandoned()
  t.equal(infer.signal.aborted, false)
})

t.test('onAbandoned: each listener told once with the reason, one that stopped listening not at all, one after it at once', async (t) => {
  const infer = request()
  const told: Array<[string, Error]> = []
  infer.onAbandoned((reason) => told.push(['first', reason]))
  const stopListening = infer.onAbandoned((reason) => told.push(['stopped', reason]))
  infer.onAbandoned((reason) => told.push(['second', reason]))
  stopListening()
  stopListening()
  t.same(told, [], 'no one told while the client is there')
  const reason = new Error('its client went away')
  infer.abandon(reason)
  infer.abandon(new Error('a later reason'))
  t.same(told, [['first', reason], ['second', reason]], 'in the order they listened, once, with the first reason')
  const late = infer.onAbandoned((reason) => told.push(['late', reason]))
  t.same(told.at(-1), ['late', reason], 'a listener after the abandonment is told at once')
  late()
  t.equal(told.length, 3)
  t.equal(infer.signal.reason, reason, 'the signal, made later, agrees')
  infer.release()
})

t.test('onAbandoned: a request whose leases ended tells no one', async (t) => {
  const infer = request()
  let told = 0
  infer.onAbandoned(() => told++)
  infer.release()
  infer.abandon()
  t.equal(told, 0)
})

t.test('a request for another model (an ensemble\'s step) is abandoned with its parent, even one made after', async (t) => {
  const parent = request()
  const before = parent.forModel(model, '1', [{ name: 'X', datatype: 'INT32', shape: [1], data: Int32Array.of(1) }], ['Y'])
  parent.abandon()
  t.match(thrownBy(() => before.throwIfAbandoned()), { kind: 'cancelled' }, 'one made before')
  const after = parent.forModel(model, '1', [{ name: 'X', datatype: 'INT32', shape: [1], data: Int32Array.of(1) }], ['Y'])
  t.match(thrownBy(() => after.throwIfAbandoned()), { kind: 'cancelled' }, 'one made after')
  before.release()
  after.release()
  parent.release()
})
