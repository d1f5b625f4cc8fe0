/** What the bench and its server child say to each other: the IPC messages, the stats the child
 * reports, and the routes it serves besides the example's. */

export interface ServerStats {
  /** Resident set size now, bytes. */
  rssBytes: number
  /** Peak resident set size of this process, bytes (getrusage ru_maxrss). */
  peakRssBytes: number
  /** CPU time used so far (user + system), microseconds. */
  cpuMicros: number
}

/** `scavenge`: one young-generation collection (a server started with `--expose-gc`), answered
 * with its new space's bytes in use after it (`null` without `--expose-gc`). */
export type ParentMessage = { type: 'bare', payload: string } | { type: 'scavenge' } | { type: 'stop' }
/** `floor`: the ports of the transports' own floor (bench/transport-floor.ts). */
export type ChildMessage = { type: 'listening', port: number, grpcPort: number, floor: { httpPort: number, grpcPort: number, ownGrpcPort: number } } | { type: 'bare-set' }
  | { type: 'scavenged', newSpaceBytes: number | null }

/** The hand-written infer route: the model table suite's baseline. */
export const HAND_INFER_ROUTE = '/bench/hand/models/:model/infer'

/** The infer floor's model (bench/infer-floor.ts): Triton's `simple` in JavaScript. */
export const FLOOR_MODEL = 'simple_js'

/** The infer floor's ladder (bench/floor-routes.ts), each step one more part of the infer path;
 * `traced` is the table's route with tracing on. */
export const FLOOR_STEPS = ['bare', 'body', 'read', 'hand', 'table', 'traced'] as const
export type FloorStep = typeof FLOOR_STEPS[number]

/** The steps bench/floor-routes.ts serves on a route of their own. */
export type FloorRouteStep = Extract<FloorStep, 'bare' | 'body' | 'read'>

export const floorRoute = (step: FloorRouteStep) => `/bench/floor/${step}/models/:model/infer`

/** The path a rung of the ladder serves FLOOR_MODEL at: the model table's own route for `table`
 * (and `traced`, the same route with tracing on). */
export function floorPath (step: FloorStep): string {
  if (step === 'table' || step === 'traced') return `/v2/models/${FLOOR_MODEL}/infer`
  return (step === 'hand' ? HAND_INFER_ROUTE : floorRoute(step)).replace(':model', FLOOR_MODEL)
}
