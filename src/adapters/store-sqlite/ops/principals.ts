/**
 * Principals and their tokens (issue 22). Plain prepared SQL: the token lookup runs on
 * every request a principal makes.
 */
import type { Principal, PrincipalLimits } from "../../../core/principals.ts";
import type { StoreDeps } from "../deps.ts";

interface PrincipalRow {
  name: string;
  unixUser: string | null;
  maxSessions: number | null;
  maxBatch: number | null;
  maxCpus: number | null;
  maxGpus: number | null;
  createdAt: number;
}

const PRINCIPAL_COLUMNS = `name, unix_user AS unixUser, max_sessions AS maxSessions,
  max_batch AS maxBatch, max_cpus AS maxCpus, max_gpus AS maxGpus, created_at AS createdAt`;

export interface NewPrincipal extends PrincipalLimits {
  readonly name: string;
  readonly unixUser: string | null;
}

export type AddPrincipalResult =
  | { readonly kind: "Added"; readonly principal: Principal }
  | { readonly kind: "Exists"; readonly field: "name" | "unixUser" };

export function addPrincipal(deps: StoreDeps, input: NewPrincipal): AddPrincipalResult {
  const sqlite = deps.db.$client;
  const now = deps.clock.now();
  return sqlite.transaction((): AddPrincipalResult => {
    const taken = sqlite
      .query<{ name: string; unixUser: string | null }, [string, string | null]>(
        "SELECT name, unix_user AS unixUser FROM principals WHERE name = ? OR unix_user = ?",
      )
      .get(input.name, input.unixUser);
    if (taken) return { kind: "Exists", field: taken.name === input.name ? "name" : "unixUser" };
    sqlite
      .query(
        "INSERT INTO principals (name, unix_user, max_sessions, max_batch, max_cpus, max_gpus, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
      )
      .run(
        input.name,
        input.unixUser,
        input.maxSessions,
        input.maxBatch,
        input.maxCpus,
        input.maxGpus,
        now,
      );
    return { kind: "Added", principal: { ...input, createdAt: now } };
  })();
}

export function listPrincipals(deps: StoreDeps): readonly Principal[] {
  return deps.db.$client
    .query<PrincipalRow, []>(`SELECT ${PRINCIPAL_COLUMNS} FROM principals ORDER BY name`)
    .all();
}

export function getPrincipal(deps: StoreDeps, name: string): Principal | null {
  return deps.db.$client
    .query<PrincipalRow, [string]>(`SELECT ${PRINCIPAL_COLUMNS} FROM principals WHERE name = ?`)
    .get(name);
}

/** Its tokens go with it (cascade); its workloads stay, owned by the name, for the admin. */
export function removePrincipal(deps: StoreDeps, name: string): "Removed" | "NotFound" {
  const result = deps.db.$client.query("DELETE FROM principals WHERE name = ?").run(name);
  return result.changes > 0 ? "Removed" : "NotFound";
}

export interface StoredToken {
  readonly id: string;
  readonly principal: string;
  readonly secretSha256: string;
  readonly createdAt: number;
  readonly expiresAt: number | null;
  readonly revokedAt: number | null;
}

const TOKEN_COLUMNS = `id, principal, secret_sha256 AS secretSha256, created_at AS createdAt,
  expires_at AS expiresAt, revoked_at AS revokedAt`;

export function insertToken(
  deps: StoreDeps,
  token: Omit<StoredToken, "createdAt" | "revokedAt">,
): "Issued" | "NoPrincipal" {
  const sqlite = deps.db.$client;
  return sqlite.transaction(() => {
    if (!getPrincipal(deps, token.principal)) return "NoPrincipal" as const;
    sqlite
      .query(
        "INSERT INTO principal_tokens (id, principal, secret_sha256, created_at, expires_at) VALUES (?, ?, ?, ?, ?)",
      )
      .run(token.id, token.principal, token.secretSha256, deps.clock.now(), token.expiresAt);
    return "Issued" as const;
  })();
}

export function findToken(deps: StoreDeps, id: string): StoredToken | null {
  return deps.db.$client
    .query<StoredToken, [string]>(`SELECT ${TOKEN_COLUMNS} FROM principal_tokens WHERE id = ?`)
    .get(id);
}

export function listTokens(deps: StoreDeps, principal: string): readonly StoredToken[] {
  return deps.db.$client
    .query<StoredToken, [string]>(
      `SELECT ${TOKEN_COLUMNS} FROM principal_tokens WHERE principal = ? ORDER BY created_at`,
    )
    .all(principal);
}

/** Idempotent: revoking a revoked token keeps its first revocation time. */
export function revokeToken(deps: StoreDeps, id: string): "Revoked" | "NotFound" {
  const sqlite = deps.db.$client;
  const now = deps.clock.now();
  const result = sqlite
    .query("UPDATE principal_tokens SET revoked_at = coalesce(revoked_at, ?) WHERE id = ?")
    .run(now, id);
  return result.changes > 0 ? "Revoked" : "NotFound";
}

/** The workload's owner (null: the admin's), or undefined when there is no such workload. */
export function workloadOwner(deps: StoreDeps, id: string): string | null | undefined {
  const row = deps.db.$client
    .query<{ owner: string | null }, [string]>("SELECT owner FROM workloads WHERE id = ?")
    .get(id);
  return row === null ? undefined : row.owner;
}

/** True when some principal is this unix account (run-as-owner: a workspace's owner). */
export function isPrincipalUnixUser(deps: StoreDeps, unixUser: string): boolean {
  return (
    deps.db.$client
      .query<{ one: number }, [string]>("SELECT 1 AS one FROM principals WHERE unix_user = ?")
      .get(unixUser) !== null
  );
}
