/**
 * Calls between the processes of a service over their sockets (lib/store/process-channel.ts), with
 * real Unix domain sockets: replies each taken before the next, parts passed as they are (large
 * ones over many reads), failures, cancels, a callee or caller that goes away, a connection that
 * sends what is not a frame, and a socket path too long to be one.
 */
import { mkdtempSync, rmSync, statSync } from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import t, { type Test } from 'tap'
import { type CallHandler, ChannelCaller, ChannelListener, type ChannelMessage, type IncomingCall } from '../lib/store/process-channel'

/** A private directory for sockets, removed when the test ends. */
function socketDirectory (t: Test): string {
  const directory = mkdtempSync(path.join(os.tmpdir(), 'fts-channel-'))
  t.teardown(() => rmSync(directory, { recursive: true, force: true }))
  return directory
}

function listener (t: Test, socketPath: string, handler: CallHandler): ChannelListener {
  const opened = new ChannelListener(socketPath, handler)
  t.teardown(() => opened.close())
  return opened
}

function callerOf (t: Test): ChannelCaller {
  const opened = new ChannelCaller()
  t.teardown(() => opened.close())
  return opened
}

/** A pair: `caller` calls `callee`, whose calls go to `onCall`. */
function pair (t: Test, onCall: CallHandler) {
  const directory = socketDirectory(t)
  const callee = listener(t, path.join(directory, 'sockets', 'callee'), onCall)
  return { caller: callerOf(t), callee, directory }
}

const text = (message: ChannelMessage) => message.parts.map((part) => Buffer.from(part).toString())

function deferred<T = void> () {
  let settle!: (value: T) => void
  const promise = new Promise<T>((resolve) => { settle = resolve })
  return { promise, resolve: settle }
}

t.test('a call gets its replies in order, each taken before the callee goes on, then its last one', async (t) => {
  const sent: string[] = []
  const answer = async (call: IncomingCall) => {
    for (const word of ['one', 'two']) {
      sent.push(`${word} sent`)
      await call.reply({ head: { word }, parts: [Buffer.from(word)] })
      sent.push(`${word} taken`)
    }
    call.end({ head: { echo: call.head }, parts: call.parts })
  }
  const { caller, callee, directory } = pair(t, (call) => { answer(call).catch(() => {}) })
  t.equal(statSync(path.dirname(callee.path)).mode & 0o777, 0o700, 'the sockets\' directory is the service user\'s alone')
  t.equal(path.dirname(callee.path), path.join(directory, 'sockets'))
  const replies: unknown[] = []
  const taken = deferred()
  const last = await caller.call(callee.path, { head: { ask: 1 }, parts: [Buffer.from('a'), new Uint8Array(0), Buffer.from('bc')] }, {
    signal: new AbortController().signal,
    onReply: async (reply: ChannelMessage) => {
      replies.push(reply.head, text(reply))
      if (replies.length === 2) {
        // The callee waits for this reply to be taken before it sends the next one.
        await new Promise((resolve) => setImmediate(resolve))
        t.same(sent, ['one sent'], 'the second reply waits for the first to be taken')
        taken.resolve()
      }
    }
  })
  await taken.promise
  t.same(replies, [{ word: 'one' }, ['one'], { word: 'two' }, ['two']])
  t.same(last.head, { echo: { ask: 1 } })
  t.same(text(last), ['a', '', 'bc'], 'parts arrive as they were sent, empty ones included')
  t.same(sent, ['one sent', 'one taken', 'two sent', 'two taken'])
})

t.test('large parts cross in many reads and come out whole', async (t) => {
  const { caller, callee } = pair(t, (call) => call.end({ head: call.parts.map((part) => part.byteLength), parts: call.parts }))
  const big = Buffer.alloc(3 * 1024 * 1024 + 7)
  for (let index = 0; index < big.length; index++) big[index] = index % 251
  const calls = await Promise.all([1, 2, 3].map(() => caller.call(callee.path, { head: null, parts: [big, Buffer.from('end')] })))
  for (const last of calls) {
    t.same(last.head, [big.length, 3])
    t.ok(Buffer.from(last.parts[0]).equals(big), 'every byte where it was')
    t.equal(Buffer.from(last.parts[1]).toString(), 'end')
  }
})

t.test('a failure reaches the caller as the callee described it; a reply after the end is refused', async (t) => {
  let answered: IncomingCall | undefined
  const { caller, callee } = pair(t, (call) => {
    answered = call
    call.fail({ code: 'ERR_X', kind: 'invalid', message: 'no such thing' })
    call.end({ head: 'ignored', parts: [] })
  })
  await t.rejects(caller.call(callee.path, { head: null, parts: [] }), { code: 'ERR_X', kind: 'invalid', message: 'no such thing' })
  await t.rejects((answered as IncomingCall).reply({ head: null, parts: [] }), { code: 'ERR_SHM_PEER_GONE', message: 'the process called is gone: its call is over' },
    'a call that is over takes no reply')
})

t.test('a cancelled call aborts the callee\'s signal and fails its pending reply; the caller gets the signal\'s reason', async (t) => {
  const reached = deferred<IncomingCall>()
  const replyRefused = deferred<unknown>()
  const { caller, callee } = pair(t, (call) => {
    call.reply({ head: 'wait for me', parts: [] }).catch(replyRefused.resolve)
    reached.resolve(call)
  })
  const cancel = new AbortController()
  const onReply = deferred()
  let refuseReply!: (error: Error) => void
  const calling = caller.call(callee.path, { head: null, parts: [] }, {
    signal: cancel.signal,
    // Not taken before the cancel: the callee waits.
    onReply: () => {
      onReply.resolve()
      return new Promise((_resolve, reject) => { refuseReply = reject })
    }
  })
  const call = await reached.promise
  await onReply.promise
  cancel.abort(new Error('the client went'))
  await t.rejects(calling, { message: 'the client went' })
  refuseReply(new Error('too late'))
  await new Promise((resolve) => setImmediate(resolve))
  const abortedBy = await new Promise((resolve) => call.signal.addEventListener('abort', () => resolve(call.signal.reason)))
  t.match(abortedBy, { code: 'ERR_SHM_PEER_GONE', message: 'the process called is gone: its caller cancelled it' })
  t.match(await replyRefused.promise, { code: 'ERR_SHM_PEER_GONE' }, 'the reply it waited on is refused')
  const already = new AbortController()
  already.abort(new Error('before it began'))
  await t.rejects(caller.call(callee.path, { head: null, parts: [] }, { signal: already.signal }), { message: 'before it began' })
})

t.test('a caller whose handler of a reply throws cancels the call', async (t) => {
  const cancelled = deferred()
  const { caller, callee } = pair(t, (call) => {
    call.signal.addEventListener('abort', () => cancelled.resolve())
    call.reply({ head: null, parts: [] }).catch(() => {})
  })
  await t.rejects(caller.call(callee.path, { head: null, parts: [] }, { onReply: () => { throw new Error('cannot take it') } }), { message: 'cannot take it' })
  await cancelled.promise
  t.pass('the callee saw its call cancelled')
})

t.test('a callee that goes away fails every call on it at once; one that is not there fails the call at once', async (t) => {
  const reached = deferred()
  const { caller, callee } = pair(t, () => reached.resolve())
  const calling = caller.call(callee.path, { head: null, parts: [] })
  const second = caller.call(callee.path, { head: null, parts: [] })
  await reached.promise
  callee.close()
  await t.rejects(calling, { name: 'PeerGoneError' })
  await t.rejects(second, { code: 'ERR_SHM_PEER_GONE', message: 'the process called is gone: its connection closed' })
  await t.rejects(caller.call(callee.path, { head: null, parts: [] }), { code: 'ERR_SHM_PEER_GONE', message: /^the process called is gone: E(NOENT|CONNREFUSED)/ },
    'a closed listener is no longer there')
  await t.rejects(caller.call(path.join(path.dirname(callee.path), 'never'), { head: null, parts: [] }), { message: 'the process called is gone: ENOENT' })
})

t.test('a caller that goes away aborts its calls there', async (t) => {
  const reached = deferred<IncomingCall>()
  const { caller, callee } = pair(t, (call) => reached.resolve(call))
  caller.call(callee.path, { head: null, parts: [] }).catch(() => {})
  const call = await reached.promise
  caller.close()
  await new Promise((resolve) => call.signal.addEventListener('abort', resolve))
  t.match(call.signal.reason, { message: 'the process called is gone: its caller went away' })
  call.end()
  t.pass('ending it then does nothing')
})

t.test('a connection that sends what is not a frame is dropped; frames split anywhere are read whole', async (t) => {
  const calls: unknown[] = []
  const { callee } = pair(t, (call) => {
    calls.push(call.head)
    call.end({ head: 'ok', parts: [] })
  })
  const frame = (head: unknown): Buffer => {
    const json = Buffer.from(JSON.stringify(head))
    const start = Buffer.alloc(13)
    start.writeUInt32BE(9 + json.length + 4, 0)
    start.writeUInt8(1, 4)
    start.writeUInt32BE(7, 5)
    start.writeUInt32BE(json.length, 9)
    return Buffer.concat([start, json, Buffer.alloc(4)])
  }
  // One byte at a time: a length, a head and the parts split over reads.
  const client = net.connect(callee.path)
  t.teardown(() => client.destroy())
  const answered = new Promise((resolve) => client.once('data', resolve))
  const bytes = frame({ split: true })
  for (let index = 0; index < bytes.length; index++) {
    client.write(bytes.subarray(index, index + 1))
    await new Promise((resolve) => setImmediate(resolve))
  }
  await answered
  t.same(calls, [{ split: true }], 'read whole')

  /** A frame that says it has one part of 100 bytes, and has none. */
  const shortPart = () => {
    const whole = frame('y')
    const broken = Buffer.concat([whole, Buffer.from([0, 0, 0, 100])])
    broken.writeUInt32BE(broken.length - 4, 0)
    broken.writeUInt32BE(1, whole.length - 4)
    return broken
  }
  for (const garbage of [Buffer.from([0, 0, 0, 2, 1, 1]), Buffer.concat([frame('x').subarray(0, 13), Buffer.from('{not json')]),
    (() => { const broken = frame('y'); broken.writeUInt32BE(5, broken.length - 4); return broken })(), shortPart()]) {
    const bad = net.connect(callee.path)
    const closed = new Promise((resolve) => bad.once('close', resolve))
    bad.on('error', () => {})
    bad.end(garbage)
    await closed
  }
  t.same(calls, [{ split: true }], 'nothing taken from garbage, and the listener still serves')
})

t.test('frames of calls that are not there (any more) are ignored', async (t) => {
  const directory = socketDirectory(t)
  const caller = callerOf(t)
  // A callee that answers every call twice: a frame for a call it made up, then the end of the real one.
  const listening = path.join(directory, 'raw')
  const server = net.createServer((socket) => {
    socket.once('data', (data) => {
      const id = data.readUInt32BE(5)
      const end = (callId: number, kind: number) => {
        const frame = Buffer.alloc(13 + 4 + 4)
        frame.writeUInt32BE(frame.length - 4, 0)
        frame.writeUInt8(kind, 4)
        frame.writeUInt32BE(callId, 5)
        frame.writeUInt32BE(4, 9)
        frame.write('null', 13)
        return frame
      }
      socket.write(Buffer.concat([end(id + 1000, 3), end(id + 1000, 2), end(id, 3)]))
    })
  })
  server.listen(listening)
  t.teardown(() => server.close())
  const last = await caller.call(listening, { head: 'hello', parts: [] })
  t.equal(last.head, null, 'the real call ended; the others were ignored')
})

t.test('a socket path longer than a socket may have is refused, naming the option to change', async (t) => {
  const directory = socketDirectory(t)
  const long = path.join(directory, 'x'.repeat(120))
  t.throws(() => new ChannelListener(long, () => {}), {
    code: 'ERR_SHM_CHANNEL_PATH_TOO_LONG',
    message: `fastify-triton-shm: the processes of a service that shares a registry and serves models call one another on sockets beside the store, and '${long}' is longer than the 107 bytes a socket's path may hold: give sharedRegistry a shorter path`
  })
})
