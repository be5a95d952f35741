/**
 * A profile the scheduler refuses (its dry run at start and every interval, profile-checks.ts)
 * is degraded in GET /v1/profiles (and the MCP door's list_profiles, the same answer) and on
 * the admin's /ui cluster page: in the scheduler's own
 * words for the admin, with the site's partition names hidden for a principal. Before, the
 * refusal was only in diagnostics, and every submission to such a profile failed with
 * "invalid placement specified: [hidden]" and no clue in the list an admin reads first.
 */
import { afterEach, describe, expect, test } from "bun:test";
import type { BackendDiagnostics, ProfileCheck } from "../../src/core/ports/allocation-backend.ts";
import type { Access } from "../../src/servers/http/deps.ts";
import { type Harness, harness } from "../support/api-harness.ts";
import { fakeBackend } from "../support/fake-backend.ts";

const ADMIN_TOKEN = "admin-secret-token";
const TCP: Access = { kind: "Bearer", token: ADMIN_TOKEN };
const SAID = "sbatch: error: Batch job submission failed: Invalid partition name specified: gpuu";
const HIDDEN =
  "sbatch: error: Batch job submission failed: Invalid placement name specified: [hidden]";
const SINCE_MS = Date.UTC(2026, 0, 2, 3, 4, 5);

const CHECKS: readonly ProfileCheck[] = [
  {
    profile: "default",
    outcome: "IMPOSSIBLE",
    detail: SAID,
    publicDetail: HIDDEN,
    checkedAt: SINCE_MS + 600_000,
    since: SINCE_MS,
  },
  {
    profile: "interactive",
    outcome: "POSSIBLE",
    detail: "sbatch: Job 3 to start at 2026-01-02T03:04:05 using 1 processors on nodes n1",
    publicDetail: "sbatch: Job 3 to start …",
    checkedAt: SINCE_MS,
    since: SINCE_MS,
  },
];

const open: Harness[] = [];
function make(): Harness {
  const h = harness({
    backend: fakeBackend({
      diagnostics: async (): Promise<BackendDiagnostics> => ({
        backend: "fake",
        healthy: true,
        message: "fine",
        calls: {},
        profileChecks: CHECKS,
      }),
    }),
  });
  open.push(h);
  return h;
}
afterEach(() => {
  for (const h of open.splice(0)) h.close();
});

function json(method: string, body?: unknown): RequestInit {
  return {
    method,
    headers: { "Content-Type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  };
}

function as(token: string, init: RequestInit = {}): RequestInit {
  const headers = new Headers(init.headers);
  headers.set("Authorization", `Bearer ${token}`);
  return { ...init, headers };
}

/** A principal's token, added and issued by the admin. */
async function principalToken(h: Harness, name: string): Promise<string> {
  expect((await h.request("/v1/principals", json("POST", { name }))).status).toBe(201);
  const issued = await h.request(
    `/v1/principals/${name}/tokens`,
    as(ADMIN_TOKEN, json("POST", {})),
    TCP,
  );
  expect(issued.status).toBe(201);
  return ((await issued.json()) as { token: string }).token;
}

type Listed = { profiles: { name: string; degraded: unknown; placement: unknown }[] };

describe("a profile the scheduler refuses", () => {
  test("the admin reads it degraded in the scheduler's own words", async () => {
    const h = make();
    for (const [init, access] of [
      [{}, undefined],
      [as(ADMIN_TOKEN), TCP],
    ] as const) {
      const res = await h.request("/v1/profiles", init, access);
      expect(res.status).toBe(200);
      const body = (await res.json()) as Listed;
      expect(body.profiles.map((p) => [p.name, p.degraded])).toEqual([
        [
          "default",
          {
            reason: "SCHEDULER_REFUSES",
            message: SAID,
            consecutiveRejections: 0,
            since: new Date(SINCE_MS).toISOString(),
            retryAt: null,
          },
        ],
        ["interactive", null],
      ]);
    }
  });

  test("a principal reads it degraded with the site's names hidden, never the scheduler's text", async () => {
    const h = make();
    const token = await principalToken(h, "alice");
    const res = await h.request("/v1/profiles", as(token), TCP);
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text).not.toContain("gpuu");
    expect(text).not.toContain("partition");
    const body = JSON.parse(text) as Listed;
    expect(body.profiles[0]?.degraded).toEqual({
      reason: "SCHEDULER_REFUSES",
      message: HIDDEN,
      consecutiveRejections: 0,
      since: new Date(SINCE_MS).toISOString(),
      retryAt: null,
    });
    // Nothing of it is placed now, said in the same hidden form.
    expect(body.profiles[0]?.placement).toEqual({
      BATCH: { placeable: false, reason: "SCHEDULER_REFUSES", message: HIDDEN },
    });
  });

  test("an open breaker keeps its count and retry time under the scheduler's reason", async () => {
    const h = make();
    h.breakers.push({
      profile: "default",
      state: {
        kind: "Open",
        consecutiveRejections: 2,
        message: "Batch job submission failed: invalid placement specified: [hidden]",
        openedAtMs: SINCE_MS + 1_000,
        retryAtMs: SINCE_MS + 31_000,
      },
    });
    const body = (await (await h.request("/v1/profiles")).json()) as Listed;
    expect(body.profiles[0]?.degraded).toEqual({
      reason: "SCHEDULER_REFUSES",
      message: SAID,
      consecutiveRejections: 2,
      since: new Date(SINCE_MS).toISOString(),
      retryAt: new Date(SINCE_MS + 31_000).toISOString(),
    });
  });

  test("the admin's /ui cluster page shows it degraded in the scheduler's words", async () => {
    const h = make();
    const res = await h.request("/ui/cluster");
    expect(res.status).toBe(200);
    const page = await res.text();
    const row = page.slice(page.indexOf("<strong>default</strong>"));
    expect(row.slice(0, row.indexOf("</tr>"))).toContain(
      `degraded (SCHEDULER_REFUSES) since ${new Date(SINCE_MS).toISOString()}: ${SAID}`,
    );
    // Its placement agrees with GET /v1/profiles: nothing of it is placed now.
    expect(row.slice(0, row.indexOf("</tr>"))).toContain("BATCH: refused (SCHEDULER_REFUSES)");
    expect(row.slice(0, row.indexOf("</tr>"))).not.toContain("BATCH: placeable");
    const other = page.slice(page.indexOf("<strong>interactive</strong>"));
    expect(other.slice(0, other.indexOf("</tr>"))).not.toContain("degraded");
  });

  test("diagnostics keep the scheduler's answer as they showed it (no principal's form)", async () => {
    const h = make();
    const body = (await (await h.request("/v1/diagnostics")).json()) as {
      backend: { profileChecks: unknown };
    };
    expect(body.backend.profileChecks).toEqual([
      {
        profile: "default",
        outcome: "IMPOSSIBLE",
        detail: SAID,
        checkedAt: new Date(SINCE_MS + 600_000).toISOString(),
      },
      {
        profile: "interactive",
        outcome: "POSSIBLE",
        detail: CHECKS[1]?.detail,
        checkedAt: new Date(SINCE_MS).toISOString(),
      },
    ]);
  });
});
