/**
 * The daemon's StoreBackup: `VACUUM INTO` a fresh file inside the state dir (0700, the same
 * filesystem, so space and permissions are the daemon's own), named so that a leftover from
 * a crash mid-copy is recognisable (`.backup-*.db`) and never mistaken for the store.
 */
import type { Database } from "bun:sqlite";
import { randomUUID } from "node:crypto";
import { join } from "node:path";
import type { StoreBackup } from "../api/deps.ts";
import type { StateLayout } from "../orchestration/layout.ts";

export function storeBackup(sqlite: Database, layout: StateLayout): StoreBackup {
  return {
    snapshot() {
      const path = join(layout.root, `.backup-${randomUUID()}.db`);
      sqlite.run("VACUUM INTO ?", [path]);
      return path;
    },
    keepBeside: [
      { name: "signing-key", path: layout.signingKey },
      { name: "admin-token", path: layout.adminToken },
    ],
  };
}
