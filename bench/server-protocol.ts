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

/** A rung of the infer floor's ladder that bench/floor-routes.ts serves on a route of its own
 * (the ladder's every step: `FloorStep` in bench/infer-floor.ts). */
export type FloorRouteStep = 'bare' | 'body' | 'read'

export const floorRoute = (step: FloorRouteStep) => `/bench/floor/${step}/models/:model/infer`

/** The path a rung of the ladder serves FLOOR_MODEL at: the model table's own route for `table`
 * (and `traced`, the same route with tracing on). */
export function floorPath (rung: 'bare' | 'body' | 'read' | 'hand' | 'table' | 'traced'): string {
  if (rung === 'table' || rung === 'traced') return `/v2/models/${FLOOR_MODEL}/infer`
  return (rung === 'hand' ? HAND_INFER_ROUTE : floorRoute(rung)).replace(':model', FLOOR_MODEL)
}
