import Fastify from 'fastify'
import { describe, expect, test } from 'tstyche'
import {
  type InferRequest, kserveModels, type ModelConfigResponse, type ModelDeclaration, type ModelMetadataResponse,
  type ModelStatisticsResponse, ModelTable, type SequenceControlInput, type SequenceControlKind
} from '../../lib/index'

const declaration: ModelDeclaration = {
  name: 'simple',
  maxBatchSize: 8,
  inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [-1, 16] }],
  outputs: [{ name: 'OUTPUT0', datatype: 'INT32', shape: [-1, 16] }],
  run (infer) { infer.output('OUTPUT0', infer.input('INPUT0').shape) }
}
const table = new ModelTable([declaration])

describe('the model table', () => {
  test('a declaration is a signature with a run, or an ensemble\'s steps', () => {
    expect<ModelDeclaration>().type.not.toBeAssignableFrom({ name: 'x', inputs: [], outputs: [] })
    const steps = [{ model: 'simple', inputMap: { INPUT0: 'IN' }, outputMap: { OUTPUT0: 'OUT' } }]
    expect<ModelDeclaration>().type.toBeAssignableFrom({ name: 'e', inputs: [], outputs: [], ensembleScheduling: { steps } })
    expect<ModelDeclaration>().type.not.toBeAssignableFrom({ name: 'e', inputs: [], outputs: [], ensembleScheduling: { steps: [{ model: 'simple' }] } })
    expect<ModelDeclaration>().type.toBeAssignableFrom({ ...declaration, instanceCount: 2, inputs: [{ name: 'I', datatype: 'FP32' as const, shape: [-1], optional: true }] })
    expect<InferRequest['parameters']>().type.toBe<Readonly<Record<string, string | number | boolean>>>()
    expect<ModelDeclaration>().type.toBeAssignableFrom({ ...declaration, backend: 'onnxruntime', labelFilenames: { OUTPUT0: 'l.txt' }, ready: false })
    expect<ModelDeclaration>().type.toBeAssignableFrom({ ...declaration, run: async (_infer: InferRequest) => {} })
  })

  test('a decoupled model sends its responses; a stateful one reads its sequence', () => {
    expect<ModelDeclaration>().type.toBeAssignableFrom({
      ...declaration,
      decoupled: true,
      run: async (infer: InferRequest) => { await infer.send({ final: true }) }
    })
    const stateful: ModelDeclaration = {
      ...declaration,
      sequenceBatching: { maxSequenceIdleMicroseconds: 1000, controlInputs: [{ name: 'START', kind: 'CONTROL_SEQUENCE_START', datatype: 'INT32', falseTrue: [0, 1] }] },
      run (infer) { if (infer.sequence !== undefined) infer.sequence.state = infer.sequence.correlationId }
    }
    expect(stateful.sequenceBatching?.controlInputs?.[0].kind).type.toBe<SequenceControlKind | undefined>()
    expect<SequenceControlInput>().type.not.toBeAssignableFrom({ name: 'S', kind: 'START' as const, datatype: 'INT32' as const })
    expect<SequenceControlInput>().type.not.toBeAssignableFrom({ name: 'S', kind: 'CONTROL_SEQUENCE_START' as const, datatype: 'FP16' as const })
    expect<InferRequest['sequenceFlags']['correlationId']>().type.toBe<bigint | string | undefined>()
    expect(table.stream('simple', undefined, { read: () => ({}) as InferRequest, respond: () => 1, send: async (_result: number | undefined, _final: boolean) => {} }))
      .type.toBe<Promise<void>>()
  })

  test('answers are Triton\'s shapes', () => {
    expect(table.metadata('simple')).type.toBe<ModelMetadataResponse>()
    expect(table.config('simple', '1')).type.toBe<ModelConfigResponse>()
    expect(table.statistics()).type.toBe<ModelStatisticsResponse>()
    expect(table.config('simple').input[0].data_type).type.toBe<ModelConfigResponse['input'][number]['data_type']>()
  })

  test('infer returns what respond gives', () => {
    expect(table.infer('simple', undefined, { read: () => ({}) as InferRequest, respond: () => 42 })).type.toBe<Promise<number>>()
    expect(table.infer('simple', '1', { read: () => ({}) as InferRequest })).type.toRaiseError()
  })

  test('kserveModels takes a table', () => {
    const app = Fastify()
    expect(app.register(kserveModels, { models: table, beforeRun: async (request) => { request.log.info('run') } })).type.not.toRaiseError()
    expect(app.register(kserveModels, { models: [declaration] })).type.toRaiseError()
    expect(app.register(kserveModels, {})).type.toRaiseError()
  })
})
