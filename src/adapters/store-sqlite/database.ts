import { Database } from "bun:sqlite";
import { type BunSQLiteDatabase, drizzle } from "drizzle-orm/bun-sqlite";
import { migrate } from "./migrate.ts";
import { schema } from "./schema.ts";

/**
 * `$client` is the bun:sqlite connection under drizzle. The reconciler's hot operations use it
 * directly: `$client.query(text)` compiles a statement once per connection and hands back the
 * cached one afterwards, where a drizzle builder re-renders and re-prepares per row.
 */
export type Db = BunSQLiteDatabase<typeof schema> & { readonly $client: Database };

export interface OpenedDatabase {
  readonly sqlite: Database;
  readonly db: Db;
  close(): void;
}

/**
 * Opens (creating if needed) and migrates the store. WAL lets the API read while the
 * reconciler writes; the busy timeout makes a second writer wait instead of failing with
 * SQLITE_BUSY; synchronous=FULL because a token persisted "before submit" must survive a
 * power cut, or INV-8 is a promise about the page cache.
 */
export function openDatabase(path: string, options: { readonly busyTimeoutMs?: number } = {}) {
  const sqlite = new Database(path, { create: true, strict: true });
  sqlite.run(`PRAGMA busy_timeout = ${Math.trunc(options.busyTimeoutMs ?? 5000)}`);
  sqlite.run("PRAGMA journal_mode = WAL");
  sqlite.run("PRAGMA synchronous = FULL");
  sqlite.run("PRAGMA foreign_keys = ON");
  migrate(sqlite);
  const db = drizzle({ client: sqlite, schema });
  const opened: OpenedDatabase = {
    sqlite,
    db,
    close() {
      sqlite.close();
    },
  };
  return opened;
}
