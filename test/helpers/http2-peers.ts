/**
 * Both ends of the package's own HTTP/2 for tests: a server whose connections are
 * `Http2ServerConnection`s, and a raw client that sends frames byte by byte, as no conforming
 * client would, and reads the server's frames as they come. What they open is closed when the
 * test ends.
 */
import { once } from 'node:events'
import net, { type AddressInfo } from 'node:net'
import type { Test } from 'tap'
import { FrameReader } from '../../lib/http2/frame-reader'
import { frame } from '../../lib/http2/frame-writer'
import { CONNECTION_PREFACE, FrameType } from '../../lib/http2/protocol'
import { Http2ServerConnection, type Http2ServerOptions } from '../../lib/http2/server-connection'
import type { Http2ServerStream } from '../../lib/http2/server-stream'

/** A WINDOW_UPDATE's increment, or RST_STREAM's error code. */
export const word = (value: number) => {
  const bytes = Buffer.alloc(4)
  bytes.writeUInt32BE(value)
  return bytes
}

/** One setting of a SETTINGS frame's payload. */
export const setting = (id: number, value: number) => {
  const bytes = Buffer.alloc(6)
  bytes.writeUInt16BE(id)
  bytes.writeUInt32BE(value, 2)
  return bytes
}

export async function http2Server (t: Test, onStream: (stream: Http2ServerStream) => void, options: Http2ServerOptions = {}) {
  const connections: Http2ServerConnection[] = []
  const sockets = new Set<net.Socket>()
  const server = net.createServer((socket) => {
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
    connections.push(new Http2ServerConnection(socket, onStream, options))
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.teardown(() => {
    for (const socket of sockets) socket.destroy()
    server.close()
  })
  const port = (server.address() as AddressInfo).port
  return { port, url: `http://127.0.0.1:${port}`, connections }
}

export interface ReadFrame { type: number, flags: number, streamId: number, payload: Buffer }

/** A client of raw frames: `preface()` sends the preface and empty SETTINGS; `next()` resolves with
 * the server's next frame that `wanted` takes (SETTINGS, their acknowledgements and WINDOW_UPDATEs
 * skipped by default), or undefined once the connection has closed. */
export async function rawHttp2Client (t: Test, port: number) {
  const socket = net.connect(port, '127.0.0.1')
  await once(socket, 'connect')
  t.teardown(() => socket.destroy())
  const frames: ReadFrame[] = []
  let closed = false
  let wake = () => {}
  const reader = new FrameReader(2 ** 24 - 1)
  reader.read(CONNECTION_PREFACE, () => {})
  socket.on('data', (chunk: Buffer) => {
    reader.read(chunk, (type, flags, streamId, payload) => frames.push({ type, flags, streamId, payload: Buffer.from(payload) }))
    wake()
  })
  socket.on('error', () => {})
  socket.on('close', () => {
    closed = true
    wake()
  })
  const routine = (read: ReadFrame) => read.type === FrameType.SETTINGS || read.type === FrameType.WINDOW_UPDATE
  return {
    socket,
    send: (type: number, flags: number, streamId: number, payload: Buffer = Buffer.alloc(0)) => socket.write(frame(type, flags, streamId, payload)),
    preface: () => socket.write(Buffer.concat([CONNECTION_PREFACE, frame(FrameType.SETTINGS, 0, 0)])),
    async next (wanted: (read: ReadFrame) => boolean = (read) => !routine(read)): Promise<ReadFrame | undefined> {
      for (;;) {
        const index = frames.findIndex(wanted)
        if (index >= 0) return frames.splice(0, index + 1)[index]
        if (closed) return undefined
        await new Promise<void>((resolve) => { wake = resolve })
      }
    }
  }
}
