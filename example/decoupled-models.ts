/**
 * Triton's decoupled test models, whose runs answer one request with any number of responses
 * (`infer.send()`): `repeat_int32` (its repeat backend) and `square_int32` (its square backend),
 * with `repeat_int32_non_decoupled`, the QA's copy of repeat_int32 configured without the
 * decoupled policy (L0_grpc_state_cleanup), which answers with the first response only.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import type { InferRequest } from '../lib/index'
import type { Model } from './model'

/** A client's mistake a model finds: answered 400 over HTTP, INVALID_ARGUMENT over gRPC. */
const invalidRequest = (message: string) => Object.assign(new Error(message), { statusCode: 400 })

const shapeText = (shape: number[]) => `[${shape.join(',')}]`

/** Fills OUT = IN[index], IDX = index, those the request asks for. */
function repeatOutputs (infer: InferRequest, value: number, index: number): void {
  const requested = infer.requestedOutputs
  if (requested.includes('OUT')) infer.output<Int32Array>('OUT', [1])[0] = value
  if (requested.includes('IDX')) infer.output<Uint32Array>('IDX', [1])[0] = index
}

/** The repeat backend: decoupled, one response per element of IN, the i-th after DELAY[i]
 * milliseconds, OUT = IN[i], IDX = i; then the final flag alone. Not decoupled, the one response
 * is the first (Triton passes a model that is not decoupled its first response only). WAIT (when
 * the backend lets its instance take another request) is read and has nothing to wait for here:
 * every request runs on its own. */
function repeatModel (name: string, decoupled: boolean): Model {
  return {
    signature: {
      name,
      versions: ['1'],
      platform: 'node',
      maxBatchSize: 0,
      inputs: [
        { name: 'IN', datatype: 'INT32', shape: [-1] },
        { name: 'DELAY', datatype: 'UINT32', shape: [-1] },
        { name: 'WAIT', datatype: 'UINT32', shape: [1] }
      ],
      outputs: [{ name: 'OUT', datatype: 'INT32', shape: [1] }, { name: 'IDX', datatype: 'UINT32', shape: [1] }]
    },
    decoupled,
    async execute (infer) {
      const { data: values, shape } = infer.input<Int32Array>('IN')
      const { data: delays, shape: delayShape } = infer.input<Uint32Array>('DELAY')
      if (shapeText(shape) !== shapeText(delayShape)) {
        throw invalidRequest(`expected IN and DELAY shape to match, got ${shapeText(shape)} and ${shapeText(delayShape)}`)
      }
      // The inputs may be in shared memory, which the client may change between responses: copied, as the backend does.
      const elements = Int32Array.from(values)
      const waits = Uint32Array.from(delays)
      const count = decoupled ? elements.length : Math.min(elements.length, 1)
      for (let index = 0; index < count; index++) {
        if (waits[index] > 0) await sleep(waits[index], undefined, { signal: infer.signal })
        repeatOutputs(infer, elements[index], index)
        if (decoupled) await infer.send()
      }
    }
  }
}

/** The square backend: for IN = n, n responses of OUT = n, then the final flag alone. */
const squareInt32: Model = {
  signature: {
    name: 'square_int32',
    versions: ['1'],
    platform: 'node',
    maxBatchSize: 0,
    inputs: [{ name: 'IN', datatype: 'INT32', shape: [1] }],
    outputs: [{ name: 'OUT', datatype: 'INT32', shape: [1] }]
  },
  decoupled: true,
  async execute (infer) {
    const value = infer.input<Int32Array>('IN').data[0]
    for (let sent = 0; sent < value; sent++) {
      infer.output<Int32Array>('OUT', [1])[0] = value
      await infer.send()
    }
  }
}

export function decoupledModels (): Model[] {
  return [repeatModel('repeat_int32', true), repeatModel('repeat_int32_non_decoupled', false), squareInt32]
}
