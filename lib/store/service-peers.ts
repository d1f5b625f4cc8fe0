/**
 * The other processes of a service that share a store (see model-store.ts's `ServicePeers`): who
 * owns each sequence, in a row of the store's `sequences` table, and calls to a process over its
 * socket (process-channel.ts), named by its row of the store's users. A row of a process that died
 * counts as no owner: the first process to look it up removes it.
 */
import { type CallOptions, ChannelCaller, ChannelListener, type ChannelMessage } from './process-channel'
import type { CallTaker, SequenceKey, ServicePeers } from './model-store'
import type { Database, Statement } from './sqlite-driver'

/** What the shared store lends its peers. */
export interface PeersContext {
  readonly db: Database
  /** This process's row among the store's users. */
  readonly userId: number
  /** The socket a process answers calls on. */
  socketOf(userId: number): string
  /** A read or write of the store, its failures answered as the store's. */
  read<T>(use: () => T): T
  /** The other processes alive now. */
  liveUserIds(): number[]
  isLive(userId: number): boolean
}

export const SEQUENCE_SCHEMA = `
  CREATE TABLE IF NOT EXISTS sequences (
    model TEXT NOT NULL,
    version TEXT NOT NULL,
    id TEXT NOT NULL,
    owner INTEGER NOT NULL,
    PRIMARY KEY (model, version, id)
  );
`

export class SqliteServicePeers implements ServicePeers {
  readonly #context: PeersContext
  readonly #statements: ReturnType<typeof prepare>
  readonly #handlers: CallTaker[] = []
  readonly #caller = new ChannelCaller()
  #listener: ChannelListener | undefined

  constructor (context: PeersContext) {
    this.#context = context
    this.#statements = prepare(context.db)
  }

  get self (): number {
    return this.#context.userId
  }

  serve (handler: CallTaker): void {
    this.#listener ??= new ChannelListener(this.#context.socketOf(this.self), (call) => {
      if (!this.#handlers.some((taker) => taker(call))) call.end()
    })
    this.#handlers.push(handler)
  }

  others (): number[] {
    return this.#context.read(() => this.#context.liveUserIds())
  }

  call (process: number, message: ChannelMessage, options?: CallOptions): Promise<ChannelMessage> {
    return this.#caller.call(this.#context.socketOf(process), message, options)
  }

  /** Read per request of a sequence this process does not hold: one row, no check that its owner
   * lives (a call to a dead one fails at once, and the sequence died with it). */
  sequenceOwner ({ model, version, id }: SequenceKey): number | undefined {
    return this.#context.read(() => this.#statements.ownerOf.get(model, version, id) as number | undefined)
  }

  claimSequence ({ model, version, id }: SequenceKey): number {
    return this.#context.read(() => {
      this.#statements.claim.run(model, version, id, this.self)
      // Another process may have taken it first; a dead one's claim is no claim.
      const owner = this.#statements.ownerOf.get(model, version, id) as number
      if (owner === this.self || this.#context.isLive(owner)) return owner
      this.#statements.takeOver.run(this.self, model, version, id, owner)
      return this.self
    })
  }

  dropSequence ({ model, version, id }: SequenceKey): void {
    this.#context.read(() => this.#statements.dropOf.run(model, version, id, this.self))
  }

  dropSequences (): void {
    this.#context.read(() => this.#statements.dropAll.run(this.self))
  }

  /** Stops answering calls, and ends this process's calls of others. */
  close (): void {
    this.#listener?.close()
    this.#caller.close()
  }
}

function prepare (db: Database) {
  const statement = (sql: string): Statement => db.prepare(sql)
  return {
    ownerOf: statement('SELECT owner FROM sequences WHERE model = ? AND version = ? AND id = ?').pluck(),
    claim: statement('INSERT OR IGNORE INTO sequences (model, version, id, owner) VALUES (?, ?, ?, ?)'),
    takeOver: statement('UPDATE sequences SET owner = ? WHERE model = ? AND version = ? AND id = ? AND owner = ?'),
    dropOf: statement('DELETE FROM sequences WHERE model = ? AND version = ? AND id = ? AND owner = ?'),
    dropAll: statement('DELETE FROM sequences WHERE owner = ?')
  }
}
