/** Writes the example's ONNX graphs (example/onnx/graphs.ts) to example/onnx/*.onnx. */
import { writeFileSync } from 'node:fs'
import path from 'node:path'
import { GRAPHS } from '../example/onnx/graphs'

for (const [file, build] of Object.entries(GRAPHS)) {
  const bytes = build()
  writeFileSync(path.join(__dirname, '..', 'example', 'onnx', file), bytes)
  console.log(`example/onnx/${file}: ${bytes.length} bytes`)
}
