/**
 * An ensemble's run, as Triton's ensemble scheduler runs one: its steps in the plan's order, each
 * on the tensors the request and the steps before it made. A decoupled step's responses each
 * continue the run on their own, with the tensors made before them, through the steps that follow
 * from it; each run that reaches the end is one response of the ensemble (of a decoupled one,
 * sent as it is made; of any other, its answer).
 */
import type { Tensor } from '../../types/kserve'
import type { InferRequest } from '../kserve/infer-request'
import { copyTensorData } from '../kserve/tensor-data'
import type { EnsemblePlan, PlannedStep } from './ensemble-plan'

/** Runs one step on `inputs` (named as its model's inputs); `answer` takes each of its
 * responses' outputs (named as its model's outputs) and is awaited before the step goes on. */
export type StepRunner = (step: PlannedStep, inputs: Tensor[], answer: (outputs: Tensor[]) => Promise<void>) => Promise<void>

/** An ensemble tensor, and the batch size of the request that made it: 0 when that was a model
 * (or the ensemble's request) that does not batch, as Triton's scheduler keeps it. */
interface Flowing { tensor: Tensor, batchSize: number }

/** The ensemble's tensors made so far, by name. */
type Tensors = Map<string, Flowing>

/** `shape` fits `declared` where -1 takes any size. */
const fits = (declared: number[], shape: number[]) =>
  declared.length === shape.length && declared.every((size, index) => size === -1 || size === shape[index])

/**
 * Triton's `ReshapeTensorDims`: a tensor passes between a model that batches and one that does not
 * as one batch. Made without batching, it goes to a batching model (`declared`: its shape, the
 * batch dimension first) as a batch of 1 where its shape is the model's without the batch
 * dimension; made by a batch of 1, it goes to a model that does not batch without its batch
 * dimension where its shape does not fit as it is. Otherwise unchanged.
 */
export function reshapeFor (shape: number[], batching: boolean, batchSize: number, declared: number[]): number[] {
  if (batching === (batchSize !== 0)) return shape
  if (batching) return fits(declared.slice(1), shape) ? [1, ...shape] : shape
  return batchSize === 1 && !fits(declared, shape) ? shape.slice(1) : shape
}

/** The step's inputs, from the ensemble tensors its input map names, shaped for its model. */
const inputsOf = ({ inputMap, batching, inputShapes }: PlannedStep, tensors: Tensors): Tensor[] =>
  Object.entries(inputMap).map(([input, name]) => {
    const { tensor, batchSize } = tensors.get(name) as Flowing
    return { ...tensor, name: input, shape: reshapeFor(tensor.shape, batching, batchSize, inputShapes[input]) }
  })

/** Records a step's outputs: made by a batch of its first input's first dimension if its model
 * batches (0 with no input, as Triton counts a request without inputs), else of 0. */
function addOutputs ({ outputMap, batching }: PlannedStep, inputs: Tensor[], outputs: Tensor[], tensors: Tensors): void {
  const batchSize = batching ? Math.max(0, ...inputs.slice(0, 1).map((input) => input.shape[0])) : 0
  for (const output of outputs) {
    const tensor = outputMap[output.name]
    if (tensor !== undefined) tensors.set(tensor, { tensor: { ...output, name: tensor }, batchSize })
  }
}

/** The ensemble's outputs the request asks for, from `tensors`, as one response. */
async function respond (infer: InferRequest, { decoupled, batching, outputShapes }: EnsemblePlan, tensors: Tensors): Promise<void> {
  const outputs = infer.requestedOutputs.flatMap((name) => {
    const made = tensors.get(name)
    return made === undefined ? [] : [{ ...made.tensor, shape: reshapeFor(made.tensor.shape, batching, made.batchSize, outputShapes[name]) }]
  })
  // Every output's storage first: one refused leaves the others unwritten.
  const stores = outputs.map((tensor) => ({ tensor, data: infer.output(tensor.name, tensor.shape) }))
  for (const { tensor, data } of stores) copyTensorData(tensor.data, data)
  if (decoupled) await infer.send()
}

/** Runs the ensemble of `plan` for `infer`, each step through `runStep`. */
export async function runEnsemble (plan: EnsemblePlan, infer: InferRequest, runStep: StepRunner): Promise<void> {
  const { steps } = plan
  const runFrom = async (first: number, tensors: Tensors): Promise<void> => {
    for (let position = first; position < steps.length; position++) {
      const step = steps[position]
      const inputs = inputsOf(step, tensors)
      if (!step.decoupled) {
        await runStep(step, inputs, async (outputs) => addOutputs(step, inputs, outputs, tensors))
        continue
      }
      await runStep(step, inputs, async (outputs) => {
        const branch = new Map(tensors)
        addOutputs(step, inputs, outputs, branch)
        await runFrom(position + 1, branch)
      })
      return
    }
    await respond(infer, plan, tensors)
  }
  const batchOf = (tensor: Tensor) => plan.batching ? tensor.shape[0] : 0
  await runFrom(0, new Map(infer.inputs.map((tensor) => [tensor.name, { tensor, batchSize: batchOf(tensor) }])))
}
