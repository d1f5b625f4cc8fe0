/**
 * The model of Triton's generate extension tests (its QA's `mock_llm`, a decoupled Python model):
 * TEXT = PROMPT. With STREAM false it sends that one response, final. With STREAM true it sends it
 * REPETITION times (a request parameter, default 1), each after DELAY seconds (none by default),
 * stopping early if the client went away, then the final flag alone, or, with FAIL_LAST, the error
 * `An Error Occurred` instead. With OUTPUT_0_DIM, TEXT has no element (as an LLM whose first token
 * ends its text answers).
 */
import { setTimeout as sleep } from 'node:timers/promises'
import type { BytesElements, InferRequest } from '../lib/index'
import type { Model } from './model'

/** The model's own failure, as the Python backend reports a `TritonError` (INTERNAL). */
const modelError = (message: string) => Object.assign(new Error(message), { statusCode: 500 })

/** TEXT for this response: PROMPT's elements, or none. */
function storeText (infer: InferRequest, prompt: BytesElements, shape: number[], empty: boolean): void {
  const text = infer.output<Buffer[]>('TEXT', empty ? [1, 0] : shape)
  if (empty) return
  for (let index = 0; index < text.length; index++) text[index] = prompt.at(index) as Buffer
}

export const mockLlm: Model = {
  signature: {
    name: 'mock_llm',
    versions: ['1'],
    platform: 'node',
    maxBatchSize: 0,
    inputs: [
      { name: 'PROMPT', datatype: 'BYTES', shape: [1, 1] },
      { name: 'STREAM', datatype: 'BOOL', shape: [1, 1] },
      { name: 'input_ids', datatype: 'INT32', shape: [1, -1], optional: true }
    ],
    outputs: [{ name: 'TEXT', datatype: 'BYTES', shape: [1, -1] }]
  },
  decoupled: true,
  async execute (infer) {
    const { REPETITION = 1, FAIL_LAST = false, DELAY, OUTPUT_0_DIM = false } = infer.parameters
    const { data: prompt, shape } = infer.input<BytesElements>('PROMPT')
    const stream = infer.input<Uint8Array>('STREAM').data[0] !== 0
    if (!stream) {
      storeText(infer, prompt, shape, OUTPUT_0_DIM === true)
      return await infer.send({ final: true })
    }
    for (let sent = 0; sent < Number(REPETITION); sent++) {
      if (DELAY !== undefined) await sleep(Number(DELAY) * 1000, undefined, { signal: infer.signal })
      storeText(infer, prompt, shape, OUTPUT_0_DIM === true)
      await infer.send()
    }
    if (FAIL_LAST === true) throw modelError('An Error Occurred')
  }
}
