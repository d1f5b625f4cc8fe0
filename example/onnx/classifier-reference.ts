/**
 * The tiny classifier computed in plain JavaScript, as the graph in graphs.ts defines it: what
 * ONNX Runtime's answer is checked against.
 */
import { CLASSIFIER, classifierWeights } from './graphs'

/** Probabilities of each class for one image, FP32 `[channels, size, size]` in row-major order. */
export function classify (image: Float32Array): Float64Array {
  const { channels, size, filters, kernel, stride, padding, classes } = CLASSIFIER
  const { convWeight, convBias, gemmWeight, gemmBias } = classifierWeights()
  const outSize = Math.floor((size + 2 * padding - kernel) / stride) + 1
  const pooled = new Float64Array(filters)
  for (let filter = 0; filter < filters; filter++) {
    let sum = 0
    for (let row = 0; row < outSize; row++) {
      for (let column = 0; column < outSize; column++) {
        let value = convBias[filter]
        for (let channel = 0; channel < channels; channel++) {
          for (let ky = 0; ky < kernel; ky++) {
            const y = row * stride - padding + ky
            if (y < 0 || y >= size) continue
            for (let kx = 0; kx < kernel; kx++) {
              const x = column * stride - padding + kx
              if (x < 0 || x >= size) continue
              value += image[(channel * size + y) * size + x] * convWeight[((filter * channels + channel) * kernel + ky) * kernel + kx]
            }
          }
        }
        sum += Math.max(value, 0)
      }
    }
    pooled[filter] = sum / (outSize * outSize)
  }
  const logits = Array.from({ length: classes }, (_, label) =>
    gemmBias[label] + pooled.reduce((total, value, filter) => total + value * gemmWeight[label * filters + filter], 0))
  const largest = Math.max(...logits)
  const exponentials = logits.map((logit) => Math.exp(logit - largest))
  const total = exponentials.reduce((sum, value) => sum + value, 0)
  return Float64Array.from(exponentials, (value) => value / total)
}

/** A deterministic test image: a smooth pattern, different in each channel. */
export function testImage (): Float32Array {
  const { channels, size } = CLASSIFIER
  return Float32Array.from({ length: channels * size * size }, (_, index) => {
    const channel = Math.floor(index / (size * size))
    const pixel = index % (size * size)
    return Math.sin(pixel / 97 + channel) * Math.cos(pixel / 1013)
  })
}
