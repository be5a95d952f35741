/**
 * The audit log (issue 22): every state-changing request, with who, which token id (never
 * the token), the route, the workload, the status and the peer; reads are not recorded;
 * the file rotates by size and keeps a bounded number of old files.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { existsSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { fileAuditLog } from "../../src/apps/daemon/audit-log.ts";
import type { Access, AuditEntry } from "../../src/servers/http/deps.ts";
import { type Harness, harness } from "../support/api-harness.ts";
import { makeTempDir, removeDir } from "../support/temp-dir.ts";

const ADMIN_TOKEN = "admin-secret-token";
const TCP: Access = { kind: "Bearer", token: ADMIN_TOKEN };
const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

function setUp(maxBytes?: number): { h: Harness; path: string } {
  const dir = makeTempDir("o4s-audit-");
  const path = join(dir, "audit.log");
  const h = harness({ audit: fileAuditLog({ path, ...(maxBytes ? { maxBytes, keep: 2 } : {}) }) });
  cleanups.push(() => {
    h.close();
    removeDir(dir);
  });
  return { h, path };
}

function call(h: Harness, path: string, token: string, init: RequestInit = {}) {
  return h.request(
    path,
    { ...init, headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" } },
    TCP,
  );
}

const post = (body: unknown): RequestInit => ({
  method: "POST",
  headers: { "Content-Type": "application/json" },
  body: JSON.stringify(body),
});
const batch = { kind: "BATCH", profile: "default", command: ["true"] };

describe("audit log", () => {
  test("a replayed submission names the workload it replayed", async () => {
    const { h, path } = setUp();
    const keyed = (): RequestInit => ({
      method: "POST",
      body: JSON.stringify(batch),
      headers: { "Content-Type": "application/json", "Idempotency-Key": "sweep-7" },
    });
    const first = (await (await h.request("/v1/workloads", keyed())).json()) as { id: string };
    expect((await h.request("/v1/workloads", keyed())).status).toBe(200);
    const entries = readFileSync(path, "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as AuditEntry);
    expect(entries.map((e) => [e.action, e.workload, e.status])).toEqual([
      ["POST /v1/workloads", first.id, 201],
      ["POST /v1/workloads", first.id, 200],
    ]);
  });

  test("who did what to which workload, with the token's id and never the token", async () => {
    const { h, path } = setUp();
    await h.request("/v1/principals", post({ name: "alice" }));
    const issued = (await (
      await call(h, "/v1/principals/alice/tokens", ADMIN_TOKEN, post({}))
    ).json()) as { id: string; token: string };
    const w = (await (await call(h, "/v1/workloads", issued.token, post(batch))).json()) as {
      id: string;
    };
    await call(h, `/v1/workloads/${w.id}/cancel`, issued.token, { method: "POST" });
    await call(h, "/v1/workloads", issued.token); // a read: not recorded
    await call(h, "/v1/workloads", "wrong-token", post(batch));

    const text = readFileSync(path, "utf8");
    expect(text).not.toContain(issued.token.slice(21));
    expect(statSync(path).mode & 0o777).toBe(0o600);
    const entries = text
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as AuditEntry);
    expect(entries.map((e) => [e.principal, e.tokenId, e.action, e.workload, e.status])).toEqual([
      ["admin", null, "POST /v1/principals", null, 201],
      ["admin", null, "POST /v1/principals/:name/tokens", null, 201],
      // The workload a submission created is named, though its id is in no path.
      ["alice", issued.id, "POST /v1/workloads", w.id, 201],
      ["alice", issued.id, "POST /v1/workloads/:id/cancel", w.id, 202],
      [null, null, "POST /v1/workloads", null, 401],
    ]);
    expect(entries[0]?.peer).toBe("unix");

    const byAlice = (await (await call(h, "/v1/audit?principal=alice", ADMIN_TOKEN)).json()) as {
      items: AuditEntry[];
    };
    expect(byAlice.items.map((e) => e.action)).toEqual([
      "POST /v1/workloads",
      "POST /v1/workloads/:id/cancel",
    ]);
    expect((await call(h, "/v1/audit", issued.token)).status).toBe(403);
  });

  test("rotated by size: the current file stays under the cap, only `keep` old files remain", async () => {
    const { h, path } = setUp(2000);
    for (let i = 0; i < 80; i++) await call(h, "/v1/workloads", ADMIN_TOKEN, post(batch));
    expect(statSync(path).size).toBeLessThanOrEqual(2000);
    expect(existsSync(`${path}.1`)).toBe(true);
    expect(existsSync(`${path}.2`)).toBe(true);
    expect(existsSync(`${path}.3`)).toBe(false);
    const all = (await (await call(h, "/v1/audit?limit=10000", ADMIN_TOKEN)).json()) as {
      items: AuditEntry[];
    };
    // Oldest first, and the newest entry is the last request made.
    const times = all.items.map((e) => e.at);
    expect([...times].sort()).toEqual(times);
    expect(all.items.length).toBeLessThan(80);
    expect(all.items.length).toBeGreaterThan(10);
  });
});
