/**
 * Registration cost, programmatic: one `Registry.register` + `unregister` (the work behind the
 * HTTP register/unregister routes, without HTTP), against the same system calls in C
 * (bench/syscalls.c), and against the addon alone (the `MappedRange` a registration makes, and
 * its `unmap`) to tell the addon's share from the registry's. Batches of the three alternate, so a
 * noisy neighbour slows all three alike; each figure is the median of its batches, and the ratio
 * the median of the batches' own ratios.
 */
import { Registry } from '../lib/registry/registry'
import { MappedRange } from '../lib/addon/posix-shm'
import { bytes, progress } from './format'
import { makeObject, removeObject } from './shm-objects'
import { median, nsPerCall, nsPerCallSettled } from './stats'
import type { SyscallsProgram } from './syscalls'

export interface RegisterPoint {
  regionBytes: number
  /** Cycles per batch. */
  iterations: number
  /** ns per register + unregister through the Registry. */
  registryNs: number
  /** ns per `new MappedRange` + `unmap` (the addon, no registry). */
  addonNs: number
  /** ns per shm_open + fstat + mmap + close + munmap in C. */
  syscallsNs: number
  /** The median over batches of registry / C, each batch's C run timed between its two registry runs. */
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
/** Each cycle runs this long before any is timed (at most WARM_UP_CALLS times): the JIT's
 * optimised code, and the kernel's caches of the object, are in place by then. */
const WARM_UP_SECONDS = 0.3
const WARM_UP_CALLS = 50_000

/** How many calls of `ns` each fit in `seconds`, kept within [MIN_ITERATIONS, most]. */
const callsIn = (seconds: number, ns: number, most: number) =>
  Math.round(Math.min(most, Math.max(MIN_ITERATIONS, seconds * 1e9 / ns)))

async function measureSize (program: SyscallsProgram, regionBytes: number, plan: RegisterPlan): Promise<RegisterPoint> {
  const object = makeObject('register', regionBytes)
  const registry = new Registry()
  try {
    const options = { key: object.key, byteSize: regionBytes }
    const registryCycle = () => {
      registry.register('bench_register', options)
      registry.unregister('bench_register')
    }
    const addonCycle = () => { new MappedRange(object.key, 0, regionBytes).unmap() }
    const warmUpCalls = callsIn(WARM_UP_SECONDS, nsPerCall(MIN_ITERATIONS, registryCycle), WARM_UP_CALLS)
    await nsPerCallSettled(warmUpCalls, registryCycle)
    await nsPerCallSettled(warmUpCalls, addonCycle)
    const iterations = callsIn(plan.batchSeconds, await nsPerCallSettled(MIN_ITERATIONS, registryCycle), MAX_ITERATIONS)
    program.run(object.key, regionBytes, iterations, 1) // C's warm-up
    const registryNs: number[] = []
    const addonNs: number[] = []
    const syscallsNs: number[] = []
    const ratios: number[] = []
    for (let batch = 0; batch < plan.batches; batch++) {
      // The C batch sits between the two it is compared with, so a slow spell of a shared machine
      // slows both sides of a batch's ratio alike.
      const registryFirst = await nsPerCallSettled(iterations, registryCycle)
      const [syscalls] = program.run(object.key, regionBytes, iterations, 1)
      const registrySecond = await nsPerCallSettled(iterations, registryCycle)
      addonNs.push(await nsPerCallSettled(iterations, addonCycle))
      registryNs.push((registryFirst + registrySecond) / 2)
      syscallsNs.push(syscalls)
      ratios.push(registryNs[batch] / syscalls)
    }
    if (registry.status().length !== 0) throw new Error('register suite left a region registered')
    return { regionBytes, iterations, registryNs: median(registryNs), addonNs: median(addonNs), syscallsNs: median(syscallsNs), ratio: median(ratios) }
  } finally {
    registry.close()
    removeObject(object)
  }
}

export async function registerSuite (program: SyscallsProgram, plan: RegisterPlan): Promise<RegisterPoint[]> {
  const points: RegisterPoint[] = []
  for (const regionBytes of plan.sizes) {
    const point = await measureSize(program, regionBytes, plan)
    progress(`register ${bytes(regionBytes)}: registry ${point.registryNs.toFixed(0)} ns, addon ${point.addonNs.toFixed(0)} ns, ` +
      `C syscalls ${point.syscallsNs.toFixed(0)} ns per cycle (${point.ratio.toFixed(2)}x)`)
    points.push(point)
  }
  return points
}
