import type { FastifyReply, FastifyRequest } from 'fastify'
import { describe, expect, test } from 'tstyche'
import Fastify from 'fastify'
import {
  apiFrameworkErrors, type BytesElements, type InferRequest, inferResponse, kserveErrorHandler, type ModelSignature, readInferRequest,
  type SystemSharedMemoryRegistry, type Tensor, type TensorData
} from '../../lib/index'

declare const request: FastifyRequest
declare const reply: FastifyReply
declare const registry: SystemSharedMemoryRegistry

const model: ModelSignature = {
  name: 'simple',
  inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [-1, 16] }],
  outputs: [{ name: 'OUTPUT0', datatype: 'INT32', shape: [-1, 16] }]
}

describe('KServe helpers', () => {
  test('readInferRequest needs a registry and a model', () => {
    expect(readInferRequest(request, reply, { registry, model })).type.toBe<InferRequest>()
    expect(readInferRequest(request, reply, { model })).type.toRaiseError()
    expect(readInferRequest(request, reply, { registry, model, limits: { maxBytesElements: 10 } })).type.toBe<InferRequest>()
    expect(readInferRequest(request, reply, { registry, model, limits: { maxElements: 10 } })).type.toRaiseError()
  })

  test('a signature may say its first dimension is a batch', () => {
    expect<ModelSignature>().type.toBeAssignableFrom({ ...model, maxBatchSize: 8 })
  })

  test('BYTES inputs are read lazily, one Buffer per element asked for', () => {
    const infer = readInferRequest(request, reply, { registry, model })
    const { data } = infer.input<BytesElements>('INPUT0')
    expect(data.at(0)).type.toBe<Buffer | undefined>()
    expect([...data]).type.toBe<Buffer[]>()
    expect(data.serialized).type.toBe<Uint8Array>()
  })

  test('model signatures only take KServe datatypes', () => {
    expect<ModelSignature['inputs'][number]>().type.not.toBeAssignableFrom({ name: 'x', datatype: 'FLOAT', shape: [1] })
  })

  test('tensors are typed by their data', () => {
    const infer = readInferRequest(request, reply, { registry, model })
    expect(infer.input<Int32Array>('INPUT0')).type.toBe<Tensor<Int32Array>>()
    expect(infer.input('INPUT0').data).type.toBe<TensorData>()
    expect(infer.output<Float32Array>('OUTPUT0', [1, 16])).type.toBe<Float32Array>()
    expect(infer.output<Buffer[]>('OUTPUT0', [1, 16])).type.toBe<Buffer[]>()
    expect(infer.output<string>('OUTPUT0', [1])).type.toRaiseError()
    expect(inferResponse(infer, reply)).type.toBe<string | Buffer>()
  })
})

describe('error shapes', () => {
  test('kserveErrorHandler is an error handler of any instance', () => {
    expect(Fastify().setErrorHandler(kserveErrorHandler)).type.not.toRaiseError()
  })

  test('apiFrameworkErrors is a frameworkErrors server option, alone or before the host\'s', () => {
    expect(Fastify({ frameworkErrors: apiFrameworkErrors() })).type.not.toRaiseError()
    expect(Fastify({ frameworkErrors: apiFrameworkErrors((error, _request, reply) => { reply.code(400).send({ oops: error.message }) }) }))
      .type.not.toRaiseError()
  })
})
