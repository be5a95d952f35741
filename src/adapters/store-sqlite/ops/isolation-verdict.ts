/** The remembered isolation verdict of a backend (schema.ts: isolation_verdicts). */
import { eq } from "drizzle-orm";
import type { StoredIsolationVerdict } from "../../../core/ports/isolation-verdict-store.ts";
import type { StoreDeps } from "../deps.ts";
import { isolationVerdicts } from "../schema.ts";

export function loadIsolationVerdict(
  deps: StoreDeps,
  backend: string,
): StoredIsolationVerdict | null {
  const row = deps.db
    .select()
    .from(isolationVerdicts)
    .where(eq(isolationVerdicts.backend, backend))
    .get();
  if (row === undefined) return null;
  let nodes: unknown;
  try {
    nodes = JSON.parse(row.nodesJson);
  } catch {
    nodes = null;
  }
  return {
    backend: row.backend,
    mechanism: row.mechanism,
    verifiedAt: row.verifiedAt,
    binary: row.binary,
    nodes: Array.isArray(nodes) ? nodes.filter((n): n is string => typeof n === "string") : [],
  };
}

export function saveIsolationVerdict(deps: StoreDeps, verdict: StoredIsolationVerdict): void {
  const row = {
    backend: verdict.backend,
    mechanism: verdict.mechanism,
    verifiedAt: verdict.verifiedAt,
    binary: verdict.binary,
    nodesJson: JSON.stringify(verdict.nodes),
  };
  deps.db
    .insert(isolationVerdicts)
    .values(row)
    .onConflictDoUpdate({ target: isolationVerdicts.backend, set: row })
    .run();
}

export function forgetIsolationVerdict(deps: StoreDeps, backend: string): void {
  deps.db.delete(isolationVerdicts).where(eq(isolationVerdicts.backend, backend)).run();
}
