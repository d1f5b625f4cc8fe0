/**
 * Registration cost, programmatic: one `Registry.register` + `unregister` (the work behind the
 * HTTP register/unregister routes, without HTTP), against the same system calls in C
 * (bench/syscalls.c), and against the addon alone (`mapObject` + `unmapObject`) to tell the
 * addon's share from the registry's. Batches of the three alternate, so a noisy neighbour slows
 * all three alike; each figure is the median of its batches.
 */
import { Registry } from '../lib/registry'
import { mapObject, unmapObject } from '../lib/posix-shm'
import { bytes, progress } from './format'
import { makeObject, removeObject } from './shm-objects'
import { median, nsPerCall } from './stats'
import type { SyscallsProgram } from './syscalls'

export interface RegisterPoint {
  regionBytes: number
  /** Cycles per batch. */
  iterations: number
  /** ns per register + unregister through the Registry. */
  registryNs: number
  /** ns per mapObject + unmapObject (the addon, no registry). */
  addonNs: number
  /** ns per shm_open + fstat + mmap + close + munmap in C. */
  syscallsNs: number
  /** registryNs / syscallsNs */
  ratio: number
}

export interface RegisterPlan {
  sizes: number[]
  /** Seconds one batch of one kind should take (the iteration count is calibrated to it). */
  batchSeconds: number
  batches: number
}

const MIN_ITERATIONS = 20
const MAX_ITERATIONS = 20_000

function measureSize (program: SyscallsProgram, regionBytes: number, plan: RegisterPlan): RegisterPoint {
  const object = makeObject('register', regionBytes)
  const registry = new Registry()
  try {
    const options = { key: object.key, byteSize: regionBytes }
    const registryCycle = () => {
      registry.register('bench_register', options)
      registry.unregister('bench_register')
    }
    const addonCycle = () => { unmapObject(mapObject(object.key, 0, regionBytes)) }
    // Warm-up (JIT, the kernel's caches of the object), which also sizes the batches.
    nsPerCall(MIN_ITERATIONS, registryCycle)
    const estimate = nsPerCall(MIN_ITERATIONS, registryCycle)
    const iterations = Math.round(Math.min(MAX_ITERATIONS, Math.max(MIN_ITERATIONS, plan.batchSeconds * 1e9 / estimate)))
    nsPerCall(iterations, addonCycle)
    program.run(object.key, regionBytes, iterations, 1)
    const registryNs: number[] = []
    const addonNs: number[] = []
    const syscallsNs: number[] = []
    for (let batch = 0; batch < plan.batches; batch++) {
      registryNs.push(nsPerCall(iterations, registryCycle))
      addonNs.push(nsPerCall(iterations, addonCycle))
      syscallsNs.push(...program.run(object.key, regionBytes, iterations, 1))
    }
    if (registry.status().length !== 0) throw new Error('register suite left a region registered')
    const point = { regionBytes, iterations, registryNs: median(registryNs), addonNs: median(addonNs), syscallsNs: median(syscallsNs) }
    return { ...point, ratio: point.registryNs / point.syscallsNs }
  } finally {
    registry.close()
    removeObject(object)
  }
}

export function registerSuite (program: SyscallsProgram, plan: RegisterPlan): RegisterPoint[] {
  return plan.sizes.map((regionBytes) => {
    const point = measureSize(program, regionBytes, plan)
    progress(`register ${bytes(regionBytes)}: registry ${point.registryNs.toFixed(0)} ns, addon ${point.addonNs.toFixed(0)} ns, ` +
      `C syscalls ${point.syscallsNs.toFixed(0)} ns per cycle (${point.ratio.toFixed(2)}x)`)
    return point
  })
}
