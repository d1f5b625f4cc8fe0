/**
 * Triton's classification extension: an output asked for with the `classification` parameter
 * (a count k) is answered as BYTES, for each batch entry the k highest-valued elements as
 * "<value>:<index>[:<label>]", highest first, with Triton's limits and words (its
 * src/classification.cc): values printed as C++'s std::to_string prints them (floats with six
 * decimals), labels from the output's `labels`.
 */
import type { Datatype, TensorData, TensorSpec } from '../../types/kserve'
import * as errors from '../errors'

/** The most elements of one batch entry Triton classifies. */
export const MAX_CLASSIFICATION_ELEMENTS = 1_000_000

type NumericArray = ArrayLike<number | bigint>

const CLASSIFIABLE = new Set<Datatype>(['UINT8', 'UINT16', 'UINT32', 'UINT64', 'INT8', 'INT16', 'INT32', 'INT64', 'FP32', 'FP64'])

/** Refuses, before the model runs, an output whose datatype has no order Triton classifies by. */
export function checkClassifiable ({ datatype }: TensorSpec): void {
  if (!CLASSIFIABLE.has(datatype)) throw errors.classificationUnsupported(datatype)
}

/** The batch entries of an output of `shape`, and the elements of each: the first dimension is
 * the batch when the model batches. */
function entriesOf (shape: number[], batched: boolean): { entries: number, elements: number } {
  const batch = batched && shape.length > 0 ? shape[0] : 0
  const elements = (batch === 0 ? shape : shape.slice(1)).reduce((count, dim) => count * dim, 1)
  return { entries: Math.max(1, batch), elements }
}

/** Refuses, before the model writes it, an output whose batch entries are too large to classify. */
export function checkClassificationSize (shape: number[], batched: boolean): void {
  if (entriesOf(shape, batched).elements > MAX_CLASSIFICATION_ELEMENTS) throw errors.classificationTooLarge()
}

/** A value as std::to_string writes it: integers in decimal, floats with six decimals. */
function valueText (value: number | bigint, float: boolean): string {
  if (!float) return String(value)
  const number = value as number
  if (Number.isNaN(number)) return 'nan'
  if (!Number.isFinite(number)) return number > 0 ? 'inf' : '-inf'
  // Doubles this large are integers, which toFixed would write in exponent form.
  return Math.abs(number) < 1e21 ? number.toFixed(6) : `${BigInt(number)}.000000`
}

/** The classification of one output: its shape ([batch, k] or [k]) and its elements. */
export function classify (datatype: Datatype, shape: number[], data: TensorData, count: number, batched: boolean,
  labels: readonly string[] = []): { shape: number[], elements: Buffer[] } {
  const { entries, elements: perEntry } = entriesOf(shape, batched)
  const values = data as unknown as NumericArray
  const float = datatype === 'FP32' || datatype === 'FP64'
  const classes = Math.min(count, perEntry)
  const elements: Buffer[] = []
  for (let entry = 0; entry < entries; entry++) {
    const start = entry * perEntry
    // 4 bytes per element of one entry while it sorts: the output itself takes at least 1.
    const indices = Uint32Array.from({ length: perEntry }, (_, index) => index)
    // Highest first; equal values in index order (Triton's sort leaves their order open).
    indices.sort((a, b) => {
      const left = values[start + a]
      const right = values[start + b]
      return left === right ? a - b : (left > right ? -1 : 1)
    })
    for (const index of indices.subarray(0, classes)) {
      const label = labels[index]
      elements.push(Buffer.from(`${valueText(values[start + index], float)}:${index}${label === undefined ? '' : `:${label}`}`))
    }
  }
  return { shape: batched && shape.length > 0 ? [shape[0], classes] : [classes], elements }
}
