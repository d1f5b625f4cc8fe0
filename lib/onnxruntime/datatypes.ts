/** KServe datatypes and the ONNX Runtime tensor types that hold the same elements. */
import type { Tensor as OrtTensor } from 'onnxruntime-node'
import type { Datatype } from '../../types/kserve'

const ORT_TYPE_OF: Partial<Record<Datatype, OrtTensor.Type>> = {
  BOOL: 'bool',
  UINT8: 'uint8',
  UINT16: 'uint16',
  UINT32: 'uint32',
  UINT64: 'uint64',
  INT8: 'int8',
  INT16: 'int16',
  INT32: 'int32',
  INT64: 'int64',
  FP16: 'float16',
  FP32: 'float32',
  FP64: 'float64',
  BYTES: 'string'
  // BF16: ONNX Runtime for JavaScript has no bfloat16 tensors.
}

const DATATYPE_OF = new Map(Object.entries(ORT_TYPE_OF).map(([datatype, type]) => [type, datatype as Datatype]))

/** The ONNX Runtime type of a KServe datatype, or undefined where it has none. */
export const ortTypeOf = (datatype: Datatype): OrtTensor.Type | undefined => ORT_TYPE_OF[datatype]

/** The KServe datatype of an ONNX Runtime type, or undefined where KServe has none (int4...). */
export const datatypeOf = (type: OrtTensor.Type): Datatype | undefined => DATATYPE_OF.get(type)

/** ONNX Runtime's name for each ONNX element type (TensorProto.DataType), by its number. */
const ORT_TYPE_OF_ELEMENT = [
  undefined, 'float32', 'uint8', 'int8', 'uint16', 'int16', 'int32', 'int64', 'string', 'bool', 'float16', 'float64',
  'uint32', 'uint64', 'complex64', 'complex128', 'bfloat16'
]

/** The ONNX Runtime type name of an ONNX element type: one that KServe has no datatype for (as
 * `datatypeOf` says) where ONNX Runtime for JavaScript has none either. */
export const ortTypeOfElement = (elementType: number): OrtTensor.Type =>
  (ORT_TYPE_OF_ELEMENT[elementType] ?? `element type ${elementType}`) as OrtTensor.Type
