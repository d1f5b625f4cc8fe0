/**
 * HTTP/2's wire constants (RFC 9113): frame types and flags, settings, error codes, and the
 * connection preface. The names are the RFC's.
 */

/** A frame's header: 24-bit length, type, flags, and a 31-bit stream identifier. */
export const FRAME_HEADER_BYTES = 9

/** What a client sends first, before its SETTINGS frame. */
export const CONNECTION_PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1')

/** The largest frame payload a peer may send before it is told otherwise (SETTINGS_MAX_FRAME_SIZE). */
export const DEFAULT_MAX_FRAME_BYTES = 16_384

export const FrameType = {
  DATA: 0x0,
  HEADERS: 0x1,
  PRIORITY: 0x2,
  RST_STREAM: 0x3,
  SETTINGS: 0x4,
  PUSH_PROMISE: 0x5,
  PING: 0x6,
  GOAWAY: 0x7,
  WINDOW_UPDATE: 0x8,
  CONTINUATION: 0x9
} as const

export const FrameFlag = {
  END_STREAM: 0x1,
  ACK: 0x1,
  END_HEADERS: 0x4,
  PADDED: 0x8,
  PRIORITY: 0x20
} as const

export const Setting = {
  HEADER_TABLE_SIZE: 0x1,
  ENABLE_PUSH: 0x2,
  MAX_CONCURRENT_STREAMS: 0x3,
  INITIAL_WINDOW_SIZE: 0x4,
  MAX_FRAME_SIZE: 0x5,
  MAX_HEADER_LIST_SIZE: 0x6
} as const

export const ErrorCode = {
  NO_ERROR: 0x0,
  PROTOCOL_ERROR: 0x1,
  INTERNAL_ERROR: 0x2,
  FLOW_CONTROL_ERROR: 0x3,
  SETTINGS_TIMEOUT: 0x4,
  STREAM_CLOSED: 0x5,
  FRAME_SIZE_ERROR: 0x6,
  REFUSED_STREAM: 0x7,
  CANCEL: 0x8,
  COMPRESSION_ERROR: 0x9,
  CONNECT_ERROR: 0xa,
  ENHANCE_YOUR_CALM: 0xb,
  INADEQUATE_SECURITY: 0xc,
  HTTP_1_1_REQUIRED: 0xd
} as const

/** An error that ends the connection (RFC 9113 §5.4.1): its code goes in the GOAWAY frame, its
 * message stays in the server (a peer learns the code alone). */
export class ConnectionError extends Error {
  readonly code: number

  constructor (code: number, message: string) {
    super(message)
    this.name = 'ConnectionError'
    this.code = code
  }
}
