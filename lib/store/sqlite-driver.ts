/**
 * The part of better-sqlite3 the shared store uses, typed here so that this package compiles and
 * type-checks without the optional peer dependency installed.
 */

export interface Statement {
  run(...parameters: unknown[]): { changes: number, lastInsertRowid: number | bigint }
  get(...parameters: unknown[]): unknown
  all(...parameters: unknown[]): unknown[]
  /** Makes `get` return the first column only. */
  pluck(): Statement
}

export interface Database {
  prepare(sql: string): Statement
  exec(sql: string): void
  pragma(sql: string): unknown
  transaction<T>(change: () => T): { immediate(): T }
  close(): void
}

/** better-sqlite3's module is the Database class itself. */
export type DatabaseConstructor = new (path: string, options: { timeout: number }) => Database
