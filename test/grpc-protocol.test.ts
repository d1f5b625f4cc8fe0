/**
 * The protocol definition the package ships, and its optional peers: the .proto carries Triton's
 * field numbers (its clients encode by number), and without grpc-js the subpath says what to install.
 */
import { readFileSync } from 'node:fs'
import { loadSync } from '@grpc/proto-loader'
import t from 'tap'
import { GRPC_LOADER_OPTIONS, inferenceService, MAX_MESSAGE_BYTES, PROTO_PATH } from '../lib/grpc'
import { grpcJs, protoLoader } from '../lib/grpc/peers'

type Field = { name: string, number: number }
type MessageType = { type: { field: Field[], nestedType: Array<{ name: string, field: Field[] }> } }

const definition = loadSync(PROTO_PATH, GRPC_LOADER_OPTIONS) as unknown as Record<string, MessageType>
const numbers = (message: string, nested?: string) => {
  const type = definition[`inference.${message}`].type
  const fields = nested === undefined ? type.field : (type.nestedType.find(({ name }) => name === nested) as { field: Field[] }).field
  return Object.fromEntries(fields.map(({ name, number }) => [name, number]))
}

t.test('the messages carry the field numbers Triton publishes', async (t) => {
  t.same(numbers('InferParameter'), { bool_param: 1, int64_param: 2, string_param: 3, double_param: 4, uint64_param: 5 })
  t.same(numbers('InferTensorContents'), {
    bool_contents: 1, int_contents: 2, int64_contents: 3, uint_contents: 4, uint64_contents: 5, fp32_contents: 6, fp64_contents: 7, bytes_contents: 8
  })
  t.same(numbers('ModelInferRequest'), { model_name: 1, model_version: 2, id: 3, parameters: 4, inputs: 5, outputs: 6, raw_input_contents: 7 })
  t.same(numbers('ModelInferRequest', 'InferInputTensor'), { name: 1, datatype: 2, shape: 3, parameters: 4, contents: 5 })
  t.same(numbers('ModelInferRequest', 'InferRequestedOutputTensor'), { name: 1, parameters: 2 })
  t.same(numbers('ModelInferResponse'), { model_name: 1, model_version: 2, id: 3, parameters: 4, outputs: 5, raw_output_contents: 6 })
  t.same(numbers('ModelInferResponse', 'InferOutputTensor'), { name: 1, datatype: 2, shape: 3, parameters: 4, contents: 5 })
  t.same(numbers('SystemSharedMemoryRegisterRequest'), { name: 1, key: 2, offset: 3, byte_size: 4 })
  t.same(numbers('SystemSharedMemoryStatusResponse', 'RegionStatus'), { name: 1, key: 2, offset: 3, byte_size: 4 })
  t.same(numbers('CudaSharedMemoryRegisterRequest'), { name: 1, raw_handle: 2, device_id: 3, byte_size: 4 })
  t.same(numbers('CudaSharedMemoryStatusResponse', 'RegionStatus'), { name: 1, device_id: 2, byte_size: 3 })
  t.same(numbers('ServerMetadataResponse'), { name: 1, version: 2, extensions: 3 })
  t.same(numbers('ModelMetadataResponse'), { name: 1, versions: 2, platform: 3, inputs: 4, outputs: 5 })
})

t.test('the service is inference.GRPCInferenceService, with the RPCs served', async (t) => {
  const { service } = inferenceService()
  t.equal(service.SystemSharedMemoryRegister.path, '/inference.GRPCInferenceService/SystemSharedMemoryRegister')
  t.ok(['ModelInfer', 'ServerLive', 'CudaSharedMemoryUnregister'].every((method) => method in service))
  t.match(readFileSync(PROTO_PATH, 'utf8'), /^package inference;$/m, 'the shipped file')
  t.equal(MAX_MESSAGE_BYTES, 2 ** 31 - 1, "Triton's message limit")
})

t.test('without the optional peers, the subpath says which package to install', async (t) => {
  const missing = (name: string) => { throw Object.assign(new Error(`Cannot find module '${name}'`), { code: 'MODULE_NOT_FOUND' }) }
  t.throws(() => grpcJs(missing), { message: "fastify-triton-shm/grpc needs the package '@grpc/grpc-js': npm install @grpc/grpc-js" })
  t.throws(() => protoLoader(missing), { message: "fastify-triton-shm/grpc needs the package '@grpc/proto-loader': npm install @grpc/proto-loader" })
  t.equal(typeof grpcJs().Server, 'function', 'loads the installed package')
})
