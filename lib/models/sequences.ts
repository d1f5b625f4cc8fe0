/**
 * The sequences of one stateful model version (Triton's sequence batcher, without the batching):
 * each request is admitted to its sequence by correlation id with Triton's checks and messages,
 * gets the model's control inputs and the sequence's state, and runs after the earlier requests of
 * its sequence. A sequence ends with its END request, starts again at a START, and is released
 * after `maxSequenceIdleMicroseconds` without a request: its state is dropped and what it holds
 * let go (leases a model kept with `hold(infer.retain())`).
 */
import type { Tensor } from '../../types/kserve'
import type { SequenceBatching, SequenceContext, SequenceControlInput, SequenceFlags } from '../../types/sequences'
import * as errors from '../errors'
import { parseBytesTensor, serializedSize, writeBytesTensor } from '../kserve/bytes-tensor'
import type { InferRequest } from '../kserve/infer-request'
import { DEFAULT_SEQUENCE_IDLE_MICROSECONDS } from './model-config'

/** A request's place in its sequence: `ready` once the sequence's earlier requests are done; `done`
 * when this one is (run, failed or abandoned), called once. */
export interface SequenceTurn {
  ready: Promise<void>
  done(): void
}

/**
 * Where a stateful model version's sequences live when several processes serve it (a shared
 * registry): each is owned by the process that started it, which alone keeps its state; keys are
 * a sequence's correlation id as a text (`n7`, `s7`).
 */
export interface SequenceDirectory {
  /** This process. */
  readonly self: number
  /** The live process that owns the sequence, if any. */
  owner(key: string): number | undefined
  /** Takes the sequence for this process unless a live one owns it; returns its owner. */
  claim(key: string): number
  /** Gives up a sequence this process owned (a failure to is no failure: see `ServicePeers`). */
  drop(key: string): void
}

/** Where a request runs: in its turn here, or in the process that owns its sequence. */
export type SequencePlace = { turn: SequenceTurn, owner?: undefined } | { owner: number }

/** One sequence: its state, what it holds, and the end of its queue of requests. */
class Sequence {
  state: unknown
  #holds: Array<() => void> = []
  #released = false
  /** Settles when the last request admitted so far is done. */
  tail: Promise<void> = Promise.resolve()
  /** Requests admitted and not yet done: a sequence with some is never idle. */
  pending = 0
  lastUsed = performance.now()

  hold (release: () => void): void {
    if (this.#released) return release()
    this.#holds.push(release)
  }

  /** Drops the state and lets go of what it held (a START of a sequence that did not end). */
  reset (): void {
    this.state = undefined
    for (const release of this.#holds.splice(0)) release()
  }

  release (): void {
    this.#released = true
    this.reset()
  }
}

/** Map keys: an integer id and the same digits as a string are two sequences, as for Triton. */
const keyOf = (correlationId: bigint | string) => typeof correlationId === 'string' ? `s${correlationId}` : `n${correlationId}`

const INTEGER_CONTROL: Record<string, (value: bigint) => Tensor['data']> = {
  UINT64: (value) => BigUint64Array.of(BigInt.asUintN(64, value)),
  INT64: (value) => BigInt64Array.of(BigInt.asIntN(64, value)),
  UINT32: (value) => Uint32Array.of(Number(BigInt.asUintN(32, value))),
  INT32: (value) => Int32Array.of(Number(BigInt.asIntN(32, value)))
}

function flagData ({ datatype, falseTrue = [0, 1] }: SequenceControlInput, on: boolean): Tensor['data'] {
  const value = falseTrue[on ? 1 : 0]
  if (datatype === 'FP32') return Float32Array.of(value)
  if (datatype === 'BOOL') return Uint8Array.of(value === 0 ? 0 : 1)
  return Int32Array.of(value)
}

function correlationIdData (name: string, correlationId: bigint | string): Tensor['data'] {
  const element = Buffer.from(String(correlationId))
  const bytes = Buffer.allocUnsafe(serializedSize([element]))
  writeBytesTensor([element], bytes)
  return parseBytesTensor(name, bytes, 1)
}

export class SequenceBatcher {
  readonly #sequences = new Map<string, Sequence>()
  readonly #idleMs: number
  readonly #controls: SequenceControlInput[]
  readonly #corrid?: SequenceControlInput
  /** The controls' shape: one element, in a batch of one for a model with a batch dimension. */
  readonly #shape: number[]
  #timer?: NodeJS.Timeout
  /** Set when other processes serve this version too: who owns which sequence. */
  #directory?: SequenceDirectory

  constructor (private readonly model: string, { maxSequenceIdleMicroseconds, controlInputs = [] }: SequenceBatching, batching: boolean) {
    this.#idleMs = (maxSequenceIdleMicroseconds ?? DEFAULT_SEQUENCE_IDLE_MICROSECONDS) / 1000
    this.#controls = controlInputs
    this.#corrid = controlInputs.find(({ kind }) => kind === 'CONTROL_SEQUENCE_CORRID')
    this.#shape = batching ? [1, 1] : [1]
  }

  /** Shares this version's sequences with the other processes that serve it, through `directory`. */
  shareWith (directory: SequenceDirectory): void {
    this.#directory = directory
  }

  /** Triton's checks of a request, in its order: the id's type against a CORRID control, batch size one, an id. */
  #check (infer: InferRequest, batchSize: number): void {
    const { correlationId } = infer.sequenceFlags
    const corrid = this.#corrid
    if (corrid !== undefined && (typeof correlationId === 'string') !== (corrid.datatype === 'BYTES')) {
      throw errors.correlationIdDatatype(infer.id, corrid.name, typeof correlationId === 'string' ? 'BYTES' : 'UINT64', this.model, corrid.datatype)
    }
    if (batchSize > 1) throw errors.sequenceBatchSize(this.model)
    if (correlationId === undefined) throw errors.missingCorrelationId(this.model)
  }

  /**
   * Where `infer` (read, not yet run) runs: throws Triton's error for a request that cannot belong
   * to a sequence; returns the process that owns its sequence when that is another one (a START
   * of a sequence nobody owns is this process's from now on), or else admits it here: gives it its
   * sequence (`infer.sequence`) and control inputs, and returns its turn. Synchronous, so requests
   * are queued in the order they were read. `batchSize`: the request's (1 for a model without a
   * batch dimension); `here`: run it here whatever the directory says (another process handed it
   * over, as the owner it found).
   */
  route (infer: InferRequest, batchSize: number, here = false): SequencePlace {
    this.#check(infer, batchSize)
    const owner = here ? undefined : this.#ownerElsewhere(infer.sequenceFlags as Required<SequenceFlags>)
    return owner === undefined ? { turn: this.#admit(infer) } : { owner }
  }

  /** The other process that owns the sequence, for one not here. */
  #ownerElsewhere ({ correlationId, start }: Required<SequenceFlags>): number | undefined {
    const directory = this.#directory
    const key = keyOf(correlationId)
    if (directory === undefined || this.#sequences.has(key)) return undefined
    const owner = start ? directory.claim(key) : directory.owner(key)
    return owner === directory.self ? undefined : owner
  }

  #admit (infer: InferRequest): SequenceTurn {
    const { correlationId, start, end } = infer.sequenceFlags as Required<SequenceFlags>
    const key = keyOf(correlationId)
    let sequence = this.#sequences.get(key)
    if (sequence === undefined) {
      if (!start) {
        // Owned by nobody, or said to be this process's by a record it has outlived: gone.
        this.#directory?.drop(key)
        throw errors.sequenceNotStarted(String(correlationId), this.model)
      }
      this.#sequences.set(key, sequence = new Sequence())
    }
    // An ended sequence is forgotten at once: a request after its END must START another.
    if (end) this.#forget(key)
    sequence.pending++
    sequence.lastUsed = performance.now()
    const previous = sequence.tail
    let finish!: () => void
    sequence.tail = new Promise((resolve) => { finish = resolve })
    const current = sequence
    infer.sequence = {
      correlationId,
      start,
      end,
      get state () { return current.state },
      set state (state) { current.state = state },
      hold: (release) => current.hold(release)
    } satisfies SequenceContext
    for (const control of this.#controls) infer.inputs.push(this.#controlTensor(control, infer.sequence))
    return {
      // A START of a sequence that did not end ends it, as Triton's does, once its requests ran.
      ready: start ? previous.then(() => current.reset()) : previous,
      // Called once: when the request ran, failed or was abandoned. One that ends before its turn
      // (abandoned while it waited) hands its turn on only once the requests before it are done.
      done: () => {
        current.pending--
        current.lastUsed = performance.now()
        if (end) current.release()
        previous.then(finish, finish)
        this.#scheduleReaper()
      }
    }
  }

  #controlTensor (control: SequenceControlInput, { correlationId, start, end }: SequenceContext): Tensor {
    const { name, kind, datatype } = control
    let data: Tensor['data']
    switch (kind) {
      case 'CONTROL_SEQUENCE_START':
        data = flagData(control, start)
        break
      case 'CONTROL_SEQUENCE_END':
        data = flagData(control, end)
        break
      case 'CONTROL_SEQUENCE_READY':
        data = flagData(control, true)
        break
      case 'CONTROL_SEQUENCE_CORRID':
        data = typeof correlationId === 'string' ? correlationIdData(name, correlationId) : INTEGER_CONTROL[datatype](correlationId)
    }
    return { name, datatype, shape: [...this.#shape], data }
  }

  /** Wakes when the first idle sequence's time is up (unref'd: it never keeps a process alive). */
  #scheduleReaper (): void {
    if (this.#timer !== undefined) return
    let next = Infinity
    for (const sequence of this.#sequences.values()) if (sequence.pending === 0) next = Math.min(next, sequence.lastUsed + this.#idleMs)
    if (next === Infinity) return
    this.#timer = setTimeout(() => {
      this.#timer = undefined
      this.#reap()
    }, Math.max(1, Math.ceil(next - performance.now())))
    this.#timer.unref()
  }

  #reap (): void {
    const now = performance.now()
    for (const [key, sequence] of this.#sequences) {
      if (sequence.pending > 0 || now - sequence.lastUsed < this.#idleMs) continue
      this.#forget(key)
      sequence.release()
    }
    this.#scheduleReaper()
  }

  /** The sequence is no longer this process's, nor anybody's. */
  #forget (key: string): void {
    this.#sequences.delete(key)
    this.#directory?.drop(key)
  }

  /** Releases every sequence now (the server is closing): later requests must START again. Their
   * records in a directory are the table's to drop, all at once. */
  endAll (): void {
    clearTimeout(this.#timer)
    this.#timer = undefined
    for (const sequence of this.#sequences.values()) sequence.release()
    this.#sequences.clear()
  }
}
