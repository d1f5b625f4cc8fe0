/**
 * Lease cost by region size: ns per `acquire` + `release` of a whole region, from 4 KiB to 1 GiB.
 * The objects are sparse (never written), so a 1 GiB region costs address space, not memory.
 * Batches of every size alternate; each figure is the median of its batches.
 */
import { Registry } from '../lib/registry/registry'
import { bytes, progress } from './format'
import { makeObject, removeObject } from './shm-objects'
import { median, nsPerCall } from './stats'

export interface ViewPoint {
  regionBytes: number
  /** ns per acquire + release of the whole region. */
  ns: number
}

export interface ViewPlan {
  sizes: number[]
  iterations: number
  batches: number
}

export function viewsSuite (plan: ViewPlan): ViewPoint[] {
  const registry = new Registry()
  const objects = plan.sizes.map((regionBytes) => makeObject('views', regionBytes))
  try {
    const cycles = plan.sizes.map((regionBytes, index) => {
      const name = `bench_view_${index}`
      registry.register(name, { key: objects[index].key, byteSize: regionBytes })
      let seen = 0
      const cycle = () => {
        const lease = registry.acquire(name, 0, regionBytes)
        seen += lease.buffer.byteLength
        lease.release()
      }
      return { regionBytes, cycle, check: () => seen }
    })
    for (const { cycle } of cycles) nsPerCall(plan.iterations, cycle)
    const samples = cycles.map((): number[] => [])
    for (let batch = 0; batch < plan.batches; batch++) {
      // Alternate the order too, so neither end of the list always runs first.
      const order = batch % 2 === 0 ? cycles.keys() : [...cycles.keys()].reverse()
      for (const index of order) samples[index].push(nsPerCall(plan.iterations, cycles[index].cycle))
    }
    for (const { regionBytes, check } of cycles) {
      if (check() === 0) throw new Error(`views of ${bytes(regionBytes)} read as empty`)
    }
    const points = cycles.map(({ regionBytes }, index) => ({ regionBytes, ns: median(samples[index]) }))
    progress(`views: ${points.map((point) => `${bytes(point.regionBytes)} ${point.ns.toFixed(0)} ns`).join(', ')}`)
    return points
  } finally {
    registry.close()
    for (const object of objects) removeObject(object)
  }
}
