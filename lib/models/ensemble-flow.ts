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

/** The ensemble's tensors made so far, by name. */
type Tensors = Map<string, Tensor>

/** The step's inputs, from the ensemble tensors its input map names. */
const inputsOf = ({ inputMap }: PlannedStep, tensors: Tensors): Tensor[] =>
  Object.entries(inputMap).map(([input, tensor]) => ({ ...tensors.get(tensor) as Tensor, name: input }))

function addOutputs ({ outputMap }: PlannedStep, outputs: Tensor[], tensors: Tensors): void {
  for (const output of outputs) {
    const tensor = outputMap[output.name]
    if (tensor !== undefined) tensors.set(tensor, { ...output, name: tensor })
  }
}

/** The ensemble's outputs the request asks for, from `tensors`, as one response. */
async function respond (infer: InferRequest, decoupled: boolean, tensors: Tensors): Promise<void> {
  const outputs = infer.requestedOutputs.flatMap((name) => tensors.get(name) ?? [])
  // Every output's storage first: one refused leaves the others unwritten.
  const stores = outputs.map((tensor) => ({ tensor, data: infer.output(tensor.name, tensor.shape) }))
  for (const { tensor, data } of stores) copyTensorData(tensor.data, data)
  if (decoupled) await infer.send()
}

/** Runs the ensemble of `plan` for `infer`, each step through `runStep`. */
export async function runEnsemble (plan: EnsemblePlan, infer: InferRequest, runStep: StepRunner): Promise<void> {
  const { steps, decoupled } = plan
  const runFrom = async (first: number, tensors: Tensors): Promise<void> => {
    for (let position = first; position < steps.length; position++) {
      const step = steps[position]
      if (!step.decoupled) {
        await runStep(step, inputsOf(step, tensors), async (outputs) => addOutputs(step, outputs, tensors))
        continue
      }
      await runStep(step, inputsOf(step, tensors), async (outputs) => {
        const branch = new Map(tensors)
        addOutputs(step, outputs, branch)
        await runFrom(position + 1, branch)
      })
      return
    }
    await respond(infer, decoupled, tensors)
  }
  await runFrom(0, new Map(infer.inputs.map((tensor) => [tensor.name, tensor])))
}
