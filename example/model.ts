/**
 * What an example model is: its KServe signature, what Triton's model configuration adds to it,
 * and the code that runs it. `example/server.ts` declares each in the package's model table.
 */
import type { InferRequest, ModelDeclaration, ModelSignature, SequenceBatching } from '../lib/index'

export interface Model {
  signature: ModelSignature
  /** Triton's `model_transaction_policy.decoupled`: `execute` sends its responses (`infer.send()`). */
  decoupled?: boolean
  /** Triton's `sequence_batching`: a stateful model. */
  sequenceBatching?: SequenceBatching
  /** What else the model table declares of it, as Triton's configuration does (its instances...). */
  settings?: Omit<Partial<ModelDeclaration>, keyof ModelSignature | 'run' | 'load' | 'unload' | 'decoupled' | 'sequenceBatching'>
  /** Reads the inputs, fills the outputs. An ensemble has none: its steps (`settings.ensembleScheduling`) run it. */
  execute?(infer: InferRequest): void | Promise<void>
  /** Loads the model again (a model repository load request), and ends it (an unload). */
  load?(): Promise<void>
  unload?(): void
}
