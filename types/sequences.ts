/**
 * Triton's sequence extension and decoupled models, as a model's declaration states them and as
 * its run sees them: what a request says of its sequence, what a stateful model keeps between
 * the requests of one sequence, and the control inputs Triton's sequence batcher gives it.
 */
import type { Datatype } from './kserve'

/**
 * What a request says of its sequence (its `sequence_id`, `sequence_start` and `sequence_end`
 * parameters). `correlationId` is undefined for a request outside any sequence (Triton's 0 or
 * `""`); an integer id is an unsigned 64-bit integer, and `1000` and `"1000"` are two sequences.
 */
export interface SequenceFlags {
  correlationId?: bigint | string
  start: boolean
  end: boolean
}

/** Triton's control kinds (`sequence_batching.control_input[].control[].kind`). */
export type SequenceControlKind = 'CONTROL_SEQUENCE_START' | 'CONTROL_SEQUENCE_END' | 'CONTROL_SEQUENCE_READY' | 'CONTROL_SEQUENCE_CORRID'

/**
 * One control input: a tensor the model table adds to every request of a sequence, for the model
 * to read like any input (shape `[1]`, or `[1, 1]` for a model with a batch dimension), as
 * Triton's sequence batcher does. START, END and READY are a flag: `falseTrue[0]` or
 * `falseTrue[1]` (Triton's `int32_false_true`, `fp32_false_true`, `bool_false_true`), in
 * `datatype` INT32, FP32 or BOOL. CORRID is the correlation id, in `datatype` UINT64, INT64,
 * UINT32, INT32 (integer ids) or BYTES (string ids; Triton's `TYPE_STRING`).
 */
export interface SequenceControlInput {
  name: string
  kind: SequenceControlKind
  datatype: Extract<Datatype, 'INT32' | 'FP32' | 'BOOL' | 'UINT64' | 'INT64' | 'UINT32' | 'BYTES'>
  /** START, END, READY: the values for false and true. Default `[0, 1]`. */
  falseTrue?: readonly [number, number]
}

/** A stateful model, as Triton's `sequence_batching` configures one. */
export interface SequenceBatching {
  /**
   * A sequence that gets no request for this long is released: its state dropped, what it holds
   * (`SequenceContext.hold`) let go, and a later request of it without `sequence_start` refused.
   * Triton's `max_sequence_idle_microseconds`; default 1,000,000 (one second), as Triton's.
   */
  maxSequenceIdleMicroseconds?: number
  /** Triton's `control_input`. Default none. */
  controlInputs?: SequenceControlInput[]
}

/**
 * A stateful model's view of the sequence a request belongs to (`infer.sequence`). The requests of
 * one sequence run one after another, in the order they arrived, whatever transport and
 * connection each came on.
 */
export interface SequenceContext<State = unknown> {
  readonly correlationId: bigint | string
  /** This request starts the sequence (`sequence_start`): `state` is undefined. */
  readonly start: boolean
  /** This request ends the sequence (`sequence_end`): after its run, the state is dropped. */
  readonly end: boolean
  /** What the model keeps between the requests of this sequence. */
  state: State | undefined
  /**
   * Calls `release` when the sequence ends, starts again, is released idle, or the table ends every
   * sequence (the server closing). For what the state holds: `hold(infer.retain())` keeps this
   * request's shared memory leases for the whole sequence.
   */
  hold(release: () => void): void
}

/** How a decoupled model sends one of its responses (`infer.send()`). */
export interface SendOptions {
  /** This is the request's last response (Triton's `TRITONSERVER_RESPONSE_COMPLETE_FINAL`). Default
   * false: the run's end sends the final flag by itself. */
  final?: boolean
}
