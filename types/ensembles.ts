/**
 * Triton's ensembles (`platform: "ensemble"`, `ensemble_scheduling`): a model that is a
 * composition of others, each step taking tensors of the ensemble (its inputs, or what earlier
 * steps made) and making more, as Triton's ensemble scheduler runs them.
 */

/** One step: a model of the same table, and how its tensors map onto the ensemble's. */
export interface EnsembleStep {
  /** The model the step runs. */
  model: string
  /** The version it runs; default the newest ready one (Triton's `model_version: -1`). */
  version?: string
  /** Each input of the step's model -> the ensemble tensor it takes: an input of the ensemble,
   * or a tensor an earlier step makes (Triton's `input_map`). */
  inputMap: Record<string, string>
  /** Each output of the step's model -> the ensemble tensor it makes: an output of the ensemble,
   * or a tensor a later step takes (Triton's `output_map`). */
  outputMap: Record<string, string>
}

/** Triton's `ensemble_scheduling`. */
export interface EnsembleScheduling {
  steps: EnsembleStep[]
}
