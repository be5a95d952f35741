/**
 * What authentication and the ownership check read on every principal's request, held in
 * memory: a token's row by id and a workload's owner by id. Without it a principal's
 * `GET /v1/workloads/{id}` made two more SQLite reads than the admin's and ran at 78 % of
 * its throughput (bench/principal-auth.bench.ts).
 *
 * Correct because one daemon owns its store (the state lock) and every change to a token
 * goes through this daemon's API, which forgets what it changed; a workload's owner is set
 * at insert and never changes. Both maps are bounded: cleared when full, re-read after.
 */
import type { StoreDeps, StoredToken } from "../../adapters/store-sqlite/index.ts";
import { findToken, workloadOwner } from "../../adapters/store-sqlite/index.ts";

const MAX_ENTRIES = 10_000;

export interface AccessCache {
  token(id: string): StoredToken | null;
  /** The workload's owner (null: the admin's), undefined when there is no such workload. */
  owner(id: string): string | null | undefined;
  /** A token was revoked or its principal removed: read it again next time. */
  forgetTokens(): void;
}

export function createAccessCache(store: StoreDeps): AccessCache {
  const tokens = new Map<string, StoredToken>();
  const owners = new Map<string, string | null>();
  return {
    token(id) {
      const held = tokens.get(id);
      if (held !== undefined) return held;
      const row = findToken(store, id);
      // Unknown ids are not held: anyone can present them, and they must not fill the map.
      if (row === null) return null;
      if (tokens.size >= MAX_ENTRIES) tokens.clear();
      tokens.set(id, row);
      return row;
    },
    owner(id) {
      const held = owners.get(id);
      if (held !== undefined) return held;
      const owner = workloadOwner(store, id);
      if (owner === undefined) return undefined;
      if (owners.size >= MAX_ENTRIES) owners.clear();
      owners.set(id, owner);
      return owner;
    },
    forgetTokens() {
      tokens.clear();
    },
  };
}
