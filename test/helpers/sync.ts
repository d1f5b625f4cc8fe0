/**
 * Synchronisation for tests that need requests in flight at once, or must wait for something the
 * code does later (a lease released when a response closes): barriers and events, never sleeps
 * or clocks. Every wait is bounded only so that a broken run fails saying what did not happen;
 * a passing run never comes near the bound, however loaded the machine.
 */
import type { EventEmitter } from 'node:events'

/** How long a wait may last before the test fails with its message. */
export const PATIENCE_MS = 60_000

/** `promise`, or a rejection naming `what` did not happen if it takes longer than `ms`. */
export async function bounded<T> (promise: Promise<T>, what: string, ms = PATIENCE_MS): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const expired = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: still waiting after ${ms / 1000} s`)), ms)
  })
  try {
    return await Promise.race([promise, expired])
  } finally {
    clearTimeout(timer)
  }
}

/** Resolves once `check()` holds, polled every 20 ms: for what a server does a turn after its
 * client sees it (a reply's close, a call's end, a failure counted). `check` may ask the server
 * (an inject). Rejects naming `what` after `PATIENCE_MS`. */
export async function eventually (check: () => boolean | Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + PATIENCE_MS
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(what)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

/** Resolves once `check()` holds: checked now, then after each `event` of `emitter`. */
export async function whenEvent (emitter: Pick<EventEmitter, 'on' | 'off'>, event: string, check: () => boolean,
  what: string, ms = PATIENCE_MS): Promise<void> {
  if (check()) return
  let listener: (() => void) | undefined
  try {
    await bounded(new Promise<void>((resolve) => {
      listener = () => { if (check()) resolve() }
      emitter.on(event, listener)
    }), what, ms)
  } finally {
    emitter.off(event, listener!)
  }
}

/**
 * Holds whoever calls `pass()` while it is closed, until `open()`. `untilHeld(n)` resolves once n
 * callers are held, so a test knows exactly what is in flight.
 */
export class Gate {
  #open: boolean
  #held: Array<() => void> = []
  #watchers: Array<{ count: number, resolve: () => void }> = []

  constructor (open = true) {
    this.#open = open
  }

  get held (): number {
    return this.#held.length
  }

  close (): void {
    this.#open = false
  }

  open (): void {
    this.#open = true
    for (const release of this.#held.splice(0)) release()
  }

  /** Resolves at once while open; while closed, when the gate opens. */
  readonly pass = async (): Promise<void> => {
    if (this.#open) return
    const released = new Promise<void>((resolve) => { this.#held.push(resolve) })
    this.#watchers = this.#watchers.filter((watcher) => {
      if (this.#held.length < watcher.count) return true
      watcher.resolve()
      return false
    })
    return released
  }

  /** Resolves once at least `count` callers are held at the gate. */
  untilHeld (count: number, what = `${count} held at the gate`): Promise<void> {
    if (this.#held.length >= count) return Promise.resolve()
    return bounded(new Promise<void>((resolve) => { this.#watchers.push({ count, resolve }) }), what)
  }
}

/**
 * Lets requests on in groups: while armed for a wave of `expected` arrivals, each arrival waits
 * until `groupSize` of them (or the wave's last ones) are waiting, then the group goes on
 * together. So at least `groupSize` requests are in flight at once, on any machine, while later
 * groups still arrive as earlier ones change the registry.
 */
export class GroupBarrier {
  #expected = 0
  #arrived = 0
  #group: Array<() => void> = []
  #groupSize = 1

  arm (expected: number, groupSize: number): void {
    this.#expected = expected
    this.#arrived = 0
    this.#groupSize = groupSize
  }

  disarm (): void {
    this.#expected = 0
  }

  readonly arrive = async (): Promise<void> => {
    if (this.#arrived >= this.#expected) return
    this.#arrived++
    const released = new Promise<void>((resolve) => { this.#group.push(resolve) })
    if (this.#group.length >= this.#groupSize || this.#arrived === this.#expected) {
      for (const release of this.#group.splice(0)) release()
    }
    await bounded(released, `request ${this.#arrived} of ${this.#expected}: its group of ${this.#groupSize} never filled`)
  }
}
