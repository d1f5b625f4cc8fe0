/**
 * The checks the send and receive timeouts share: every check registered at a period runs at each
 * tick until it stops (itself or from outside), and the interval stops at the first tick that finds
 * none, to start again for the next. Node's mock timers move the clock, so each tick happens where
 * the test says, never when the machine gets to it.
 */
import { mock } from 'node:test'
import t from 'tap'
import { checkEvery, checkPeriodFor } from '../lib/util/periodic-checks'

// A period no other check of this process uses.
const PERIOD = 7

t.test('checks share a period\'s ticks until they stop; an idle tick stops the interval, the next check starts one', async (t) => {
  mock.timers.enable({ apis: ['setInterval'] })
  t.teardown(() => mock.timers.reset())
  const runs = { a: 0, b: 0, c: 0 }
  const stopA = checkEvery(PERIOD, () => { runs.a++ })
  mock.timers.tick(3)
  const stopB = checkEvery(PERIOD, () => { if (++runs.b === 2) stopB() })
  mock.timers.tick(4)
  t.same(runs, { a: 1, b: 1, c: 0 }, 'a check added within a period runs at its tick, beside the first')
  mock.timers.tick(PERIOD * 2)
  t.same(runs, { a: 3, b: 2, c: 0 }, 'each tick runs every check; one stopped itself after two')
  stopA()
  mock.timers.tick(PERIOD)
  t.same(runs, { a: 3, b: 2, c: 0 }, 'a check stopped from outside runs no more')
  // The tick at 28 found no check and stopped the interval: one added at 31 runs 7 later, at 38,
  // not at the old interval's 35.
  mock.timers.tick(3)
  const stopC = checkEvery(PERIOD, () => { runs.c++ })
  mock.timers.tick(4)
  t.equal(runs.c, 0, 'the idle interval stopped: no tick at its old phase')
  mock.timers.tick(3)
  t.equal(runs.c, 1, 'a new interval, a period after the check that started it')
  stopC()
  mock.timers.tick(PERIOD)
})

t.test('a deadline is checked every tenth of it, from 10 ms to 1 s', async (t) => {
  t.same([1, 100, 250, 5000, 30_000, 60_000].map(checkPeriodFor), [10, 10, 25, 500, 1000, 1000])
})
