/** The headers of the binary tensor data extension. */

/** The length of an infer body's JSON part; the rest is the inputs' bytes (0: Triton's raw request). */
export const HEADER_LENGTH_HEADER = 'inference-header-content-length'
