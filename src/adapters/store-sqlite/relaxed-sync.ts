import type { Database } from "bun:sqlite";

/**
 * Runs `write` with `synchronous = NORMAL` on this connection, then puts the setting back.
 *
 * Why: the store runs WAL with synchronous=FULL, so every commit waits for an fsync (4 ms
 * median, 8 ms p95 on the 2-core test machine, more than a whole steady reconciler tick).
 * Some writes need not survive a power cut on their own: they only mirror what the backend
 * reports, so a tick after a reboot re-observes and writes them again. In WAL mode NORMAL
 * still survives a process crash (the commit is in the WAL, in the page cache); only a power
 * cut may take the newest commits with it, and always a suffix: the WAL is replayed in
 * order, so the next FULL commit (a mint, a terminal step) syncs every frame before it too.
 * A write whose loss would break a promise made outside the store (a token before submit,
 * an ending before the backend may forget it) must not come through here.
 *
 * Synchronous and restored in `finally`: nothing else runs on the connection in between
 * (JavaScript runs one thing at a time), so no other write is committed relaxed by accident.
 */
export function withRelaxedSync<T>(sqlite: Database, write: () => T): T {
  const row = sqlite.query<{ synchronous: number }, []>("PRAGMA synchronous").get();
  const previous = row?.synchronous ?? 2;
  // 0 OFF, 1 NORMAL: already as relaxed or more; never tighten or loosen further here.
  if (previous <= 1) return write();
  sqlite.run("PRAGMA synchronous = NORMAL");
  try {
    return write();
  } finally {
    sqlite.run(`PRAGMA synchronous = ${Math.trunc(previous)}`);
  }
}
