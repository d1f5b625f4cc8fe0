/**
 * An ensemble's steps, checked against the models of its table when the table is made, as
 * Triton checks an ensemble when it loads one: every step names a declared model and maps its
 * tensors onto the ensemble's, every tensor is made once, with one datatype, before a step takes
 * it, and the flow of decoupled steps is one Triton's scheduler can follow. The plan says whether
 * the ensemble is decoupled (it is if any step is, as Triton decides) and in which order its
 * steps can run.
 */
import type { EnsembleScheduling, EnsembleStep } from '../../types/ensembles'
import type { Datatype, TensorSpec } from '../../types/kserve'
import * as errors from '../errors'
import { DEFAULT_VERSIONS, type ModelDeclaration } from './declaration'

/** A step as the ensemble runs it. */
export interface PlannedStep extends EnsembleStep {
  /** Its place in the declaration. */
  index: number
  /** The step's model answers with any number of responses: each continues the ensemble's run. */
  decoupled: boolean
  /** The step's model batches (`maxBatchSize` above 0). */
  batching: boolean
  /** The step's model's input shapes as declared, by name. */
  inputShapes: Record<string, number[]>
}

export interface EnsemblePlan {
  steps: PlannedStep[]
  decoupled: boolean
  /** The ensemble batches, and its outputs' shapes as declared, by name. */
  batching: boolean
  outputShapes: Record<string, number[]>
}

const shapesOf = (tensors: TensorSpec[]) => Object.fromEntries(tensors.map(({ name, shape }) => [name, shape]))

/** The declarations of a table by name, each version's. */
export type DeclarationsByName = Map<string, ModelDeclaration[]>

/** Where an ensemble tensor comes from: its datatype, and the decoupled step whose responses it
 * follows (0: the request itself), as Triton labels tensors. */
interface TensorOrigin {
  datatype: Datatype
  label: number
}

/** The declaration of the version a step runs: the one named, or the newest declared. */
function stepDeclaration (versions: ModelDeclaration[], version: string | undefined): ModelDeclaration | undefined {
  const versionsOf = (declaration: ModelDeclaration) => declaration.versions ?? DEFAULT_VERSIONS
  if (version !== undefined) return versions.find((declaration) => versionsOf(declaration).includes(version))
  const newest = (declaration: ModelDeclaration) => Math.max(...versionsOf(declaration).map(Number))
  return versions.reduce((latest, declaration) => newest(declaration) > newest(latest) ? declaration : latest)
}

class Planner {
  readonly #plans = new Map<ModelDeclaration, EnsemblePlan>()
  readonly #planning = new Set<ModelDeclaration>()

  constructor (private readonly declarations: DeclarationsByName) {}

  /** The plan of ensemble `declaration` (made once; a nested ensemble's first). */
  plan (declaration: ModelDeclaration): EnsemblePlan {
    const known = this.#plans.get(declaration)
    if (known !== undefined) return known
    if (this.#planning.has(declaration)) throw errors.invalidModelDeclaration(declaration.name, 'an ensemble that contains itself')
    this.#planning.add(declaration)
    const plan = new EnsembleChecker(declaration, (step, at) => this.#stepModel(declaration.name, step, at)).check()
    this.#planning.delete(declaration)
    this.#plans.set(declaration, plan)
    return plan
  }

  /** The declaration a step runs, and whether it is decoupled. */
  #stepModel (ensemble: string, { model, version }: EnsembleStep, at: string): { declaration: ModelDeclaration, decoupled: boolean } {
    const versions = this.declarations.get(model)
    if (versions === undefined) throw errors.invalidModelDeclaration(ensemble, `${at}: model '${model}' is not declared in the table`)
    const declaration = stepDeclaration(versions, version)
    if (declaration === undefined) throw errors.invalidModelDeclaration(ensemble, `${at}: model '${model}' has no version ${version as string}`)
    if (declaration.sequenceBatching !== undefined) {
      throw errors.invalidModelDeclaration(ensemble, `${at}: model '${model}' is stateful: ensembles of stateful models are not supported`)
    }
    const decoupled = declaration.ensembleScheduling === undefined ? declaration.decoupled === true : this.plan(declaration).decoupled
    return { declaration, decoupled }
  }
}

const specOf = (tensors: TensorSpec[], name: string) => tensors.find((tensor) => tensor.name === name)

/** Checks one ensemble's steps in the order they can run, labelling its tensors as it goes. */
class EnsembleChecker {
  readonly #origins = new Map<string, TensorOrigin>()
  #labels = 0
  /** The origin of the tensors each decoupled step takes, by step. */
  readonly #decoupledInputs = new Map<number, { label: number, model: string }>()

  constructor (private readonly ensemble: ModelDeclaration,
    private readonly stepModel: (step: EnsembleStep, at: string) => { declaration: ModelDeclaration, decoupled: boolean }) {}

  #invalid (reason: string): Error {
    return errors.invalidModelDeclaration(this.ensemble.name, reason)
  }

  check (): EnsemblePlan {
    const { inputs, outputs, maxBatchSize = 0 } = this.ensemble
    for (const { name, datatype } of inputs) this.#origins.set(name, { datatype, label: 0 })
    const steps = (this.ensemble.ensembleScheduling as EnsembleScheduling).steps.map((step, index) => {
      const at = `'ensembleScheduling.steps.${index}'`
      const { declaration, decoupled } = this.stepModel(step, at)
      this.#checkMaps(step, declaration, at)
      this.#checkBatch(declaration, maxBatchSize)
      const batching = (declaration.maxBatchSize ?? 0) > 0
      return { step: { ...step, index, decoupled, batching, inputShapes: shapesOf(declaration.inputs) }, declaration }
    })
    const ordered = this.#order(steps)
    for (const { name, datatype } of outputs) {
      const origin = this.#origins.get(name)
      if (origin === undefined || specOf(inputs, name) !== undefined) throw this.#invalid(`output '${name}' is made by no step`)
      if (origin.datatype !== datatype) throw this.#invalid(`output '${name}' is ${datatype}, and its step makes ${origin.datatype}`)
    }
    return { steps: ordered, decoupled: this.#labels > 0, batching: maxBatchSize > 0, outputShapes: shapesOf(outputs) }
  }

  /** Every mapped name is a tensor of the step's model; every required input is mapped. */
  #checkMaps ({ model, inputMap, outputMap }: EnsembleStep, { inputs, outputs }: ModelDeclaration, at: string): void {
    const unknownInput = Object.keys(inputMap).find((name) => specOf(inputs, name) === undefined)
    if (unknownInput !== undefined) throw this.#invalid(`${at}: '${unknownInput}' is not an input of model '${model}'`)
    const unmapped = inputs.find(({ name, optional }) => optional !== true && inputMap[name] === undefined)
    if (unmapped !== undefined) throw this.#invalid(`${at}: input '${unmapped.name}' of model '${model}' is not mapped`)
    const unknownOutput = Object.keys(outputMap).find((name) => specOf(outputs, name) === undefined)
    if (unknownOutput !== undefined) throw this.#invalid(`${at}: '${unknownOutput}' is not an output of model '${model}'`)
  }

  /** Triton's rule: a model that batches must take the ensemble's batches. */
  #checkBatch ({ name, maxBatchSize = 0 }: ModelDeclaration, ensembleBatch: number): void {
    if (maxBatchSize !== 0 && maxBatchSize < ensembleBatch) {
      throw this.#invalid(`ensemble ${this.ensemble.name} allows maximum batch size ${ensembleBatch}, but it contains model ${name} ` +
        `which only allows maximum batch size to be ${maxBatchSize}`)
    }
  }

  /** The steps in an order each can run in, every tensor it takes made before it: of the steps
   * that can run, one that is not decoupled first, so that a decoupled step's responses continue
   * with only the steps that follow from it. */
  #order (steps: Array<{ step: PlannedStep, declaration: ModelDeclaration }>): PlannedStep[] {
    const ordered: PlannedStep[] = []
    const waiting = steps.slice()
    while (waiting.length > 0) {
      const ready = waiting.filter(({ step }) => Object.values(step.inputMap).every((tensor) => this.#origins.has(tensor)))
      if (ready.length === 0) {
        const { step } = waiting[0]
        const missing = Object.values(step.inputMap).find((tensor) => !this.#origins.has(tensor)) as string
        throw this.#invalid(`'ensembleScheduling.steps.${step.index}': tensor '${missing}' is neither an input of the ensemble nor made by a step that can run before`)
      }
      const next = ready.find(({ step }) => !step.decoupled) ?? ready[0]
      this.#make(next.step, next.declaration)
      ordered.push(next.step)
      waiting.splice(waiting.indexOf(next), 1)
    }
    return ordered
  }

  /** Records the tensors a step makes, after checking those it takes. */
  #make (step: PlannedStep, { inputs, outputs }: ModelDeclaration): void {
    const at = `'ensembleScheduling.steps.${step.index}'`
    const labels = new Set<number>()
    for (const [input, tensor] of Object.entries(step.inputMap)) {
      const origin = this.#origins.get(tensor) as TensorOrigin
      const { datatype } = specOf(inputs, input) as TensorSpec
      if (origin.datatype !== datatype) throw this.#invalid(`${at}: tensor '${tensor}' is ${origin.datatype}, and input '${input}' of model '${step.model}' is ${datatype}`)
      labels.add(origin.label)
    }
    if (labels.size > 1) {
      throw this.#invalid(`in ensemble ${this.ensemble.name}, step of model '${step.model}' receives inputs originated from different decoupled models`)
    }
    const label = labels.size === 0 ? 0 : [...labels][0]
    if (step.decoupled) this.#checkAlone(step, label)
    const made = step.decoupled ? ++this.#labels : label
    for (const [output, tensor] of Object.entries(step.outputMap)) {
      if (this.#origins.has(tensor)) throw this.#invalid(`${at}: tensor '${tensor}' is made twice (an input of the ensemble, or another step's output)`)
      this.#origins.set(tensor, { datatype: (specOf(outputs, output) as TensorSpec).datatype, label: made })
    }
  }

  /** Decoupled steps follow one another: two that take tensors of one origin would answer side by
   * side, each response of one with none of the other's. */
  #checkAlone (step: PlannedStep, label: number): void {
    const beside = [...this.#decoupledInputs.values()].find((other) => other.label === label)
    if (beside !== undefined) {
      throw this.#invalid(`'ensembleScheduling.steps.${step.index}': decoupled models '${beside.model}' and '${step.model}' take tensors of one origin: ` +
        'an ensemble runs its decoupled steps one after another only')
    }
    this.#decoupledInputs.set(step.index, { label, model: step.model })
  }
}

/** The plan of every ensemble among `declarations`, by declaration; throws
 * `ERR_SHM_INVALID_MODEL_DECLARATION` naming the ensemble and what is wrong with it. */
export function planEnsembles (declarations: DeclarationsByName): Map<ModelDeclaration, EnsemblePlan> {
  const planner = new Planner(declarations)
  const plans = new Map<ModelDeclaration, EnsemblePlan>()
  for (const versions of declarations.values()) {
    for (const declaration of versions) if (declaration.ensembleScheduling !== undefined) plans.set(declaration, planner.plan(declaration))
  }
  return plans
}
