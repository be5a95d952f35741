import { afterEach, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { storeBackup } from "../../src/apps/daemon/store-backup.ts";
import { stateLayout } from "../../src/core/layout.ts";
import { openApiDocument } from "../../src/servers/http/system/openapi.ts";
import { type Harness, harness, problemOf } from "../support/api-harness.ts";
import { fakeBackend, PROFILES } from "../support/fake-backend.ts";
import { checkMetrics, PROMTOOL, skipLine } from "../support/promtool.ts";

const open: Harness[] = [];
function make(options: Parameters<typeof harness>[0] = {}): Harness {
  const h = harness(options);
  open.push(h);
  return h;
}
afterEach(() => {
  for (const h of open.splice(0)) h.close();
});

describe("health and profiles", () => {
  test("GET /healthz", async () => {
    const h = make();
    const res = await h.request("/healthz");
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: "ok" });
  });

  test("GET /v1/profiles shows the public view only", async () => {
    // A backend that hands over richer objects than the port promises: the mapping onto
    // its own queues must not ride along into the response.
    const leaky = PROFILES.map((p) => ({ ...p, partition: "gpu-a100", qos: "high", queue: "q" }));
    const h = make({ backend: fakeBackend({ profiles: () => leaky }) });
    const res = await h.request("/v1/profiles");
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text).not.toMatch(/partition|qos|queue|gpu-a100/i);
    const body = JSON.parse(text) as { profiles: Record<string, unknown>[] };
    expect(body.profiles.map((p) => p["name"])).toEqual(["default", "interactive"]);
    expect(Object.keys(body.profiles[0] ?? {}).sort()).toEqual([
      "degraded",
      "description",
      "environments",
      "kinds",
      "mounts",
      "name",
      "network",
      "placement",
      "resources",
      "runAs",
    ]);
  });

  test("GET /v1/profiles says each profile's network; one that does not say has the host's", async () => {
    const profiles = PROFILES.map((p, i) => (i === 0 ? { ...p, network: "none" as const } : p));
    const h = make({ backend: fakeBackend({ profiles: () => profiles }) });
    const body = (await (await h.request("/v1/profiles")).json()) as {
      profiles: { name: string; network: string }[];
    };
    expect(body.profiles.map((p) => [p.name, p.network])).toEqual([
      ["default", "none"],
      ["interactive", "host"],
    ]);
  });

  test("placement says per profile and kind whether it can be placed now, and why not", async () => {
    const unverified = make();
    const body = (await (await unverified.request("/v1/profiles")).json()) as {
      profiles: { name: string; placement: Record<string, unknown> }[];
    };
    expect(body.profiles.find((p) => p.name === "default")?.placement).toEqual({
      BATCH: { placeable: true, reason: null, message: null },
    });
    expect(body.profiles.find((p) => p.name === "interactive")?.placement).toEqual({
      SESSION: {
        placeable: false,
        reason: "ISOLATION_UNAVAILABLE",
        message: "backend fake does not isolate sessions",
      },
      BATCH: { placeable: true, reason: null, message: null },
    });
    const verified = make({
      backend: fakeBackend({
        capabilities: {
          sessionIsolation: {
            verifySessionIsolation: async () => ({ kind: "Verified", mechanism: "test" }),
          },
        },
      }),
    });
    const ok = (await (await verified.request("/v1/profiles")).json()) as typeof body;
    expect(ok.profiles.find((p) => p.name === "interactive")?.placement["SESSION"]).toEqual({
      placeable: true,
      reason: null,
      message: null,
    });
  });
});

describe("a degraded profile (its breaker open)", () => {
  test("GET /v1/profiles, diagnostics and /metrics all say so, with the backend's message", async () => {
    const h = make();
    const openedAtMs = Date.UTC(2026, 0, 2, 3, 4, 5);
    h.breakers.push({
      profile: "default",
      state: {
        kind: "Open",
        consecutiveRejections: 3,
        message: "Batch job submission failed: Requested partition configuration not available now",
        openedAtMs,
        retryAtMs: openedAtMs + 30_000,
      },
    });
    const degraded = {
      reason: "SUBMISSIONS_REFUSED",
      message: "Batch job submission failed: Requested partition configuration not available now",
      consecutiveRejections: 3,
      since: new Date(openedAtMs).toISOString(),
      retryAt: new Date(openedAtMs + 30_000).toISOString(),
    };
    const profiles = (await (await h.request("/v1/profiles")).json()) as {
      profiles: { name: string; degraded: unknown; placement: Record<string, unknown> }[];
    };
    expect(profiles.profiles.map((p) => [p.name, p.degraded])).toEqual([
      ["default", degraded],
      ["interactive", null],
    ]);
    // Nothing of it is placed now: its placement says so, with the same reason and words.
    expect(profiles.profiles[0]?.placement).toEqual({
      BATCH: { placeable: false, reason: "SUBMISSIONS_REFUSED", message: degraded.message },
    });
    expect(profiles.profiles[1]?.placement["BATCH"]).toMatchObject({ placeable: true });
    const diagnostics = (await (await h.request("/v1/diagnostics")).json()) as {
      profiles: unknown;
    };
    expect(diagnostics.profiles).toEqual([{ name: "default", consecutiveRejections: 3, degraded }]);
    const metrics = await (await h.request("/metrics")).text();
    expect(metrics).toContain('openai4s_profile_degraded{profile="default"} 1');
    expect(metrics).toContain('openai4s_profile_degraded{profile="interactive"} 0');
    expect(metrics).toContain('openai4s_profile_consecutive_rejections{profile="default"} 3');
  });
});

describe("GET /v1/diagnostics", () => {
  test("backend report and the reconciler's last tick", async () => {
    const h = make();
    expect(
      ((await (await h.request("/v1/diagnostics")).json()) as { reconciler: unknown }).reconciler,
    ).toEqual({ lastTick: null });
    h.tick = {
      startedAt: Date.UTC(2026, 0, 2, 3, 4, 5),
      durationMs: 12.5,
      backendCalls: { observe: 1, submit: 1 },
      backendCallsTotal: 2,
      backendUnavailable: false,
      error: null,
    };
    const body = (await (await h.request("/v1/diagnostics")).json()) as Record<string, unknown>;
    expect(body).toEqual({
      version: "9.9.9-test",
      backend: {
        name: "fake",
        healthy: true,
        message: "fine",
        calls: { observe: 3 },
        callsPerSecond: 0.5,
      },
      isolation: {
        launchesSandboxed: false,
        unsandboxedBatchAllowed: false,
        batchRefusal: null,
        jobIdentity: "unknown",
      },
      profiles: [],
      reconciler: {
        lastTick: {
          startedAt: "2026-01-02T03:04:05.000Z",
          durationMs: 12.5,
          backendCalls: { observe: 1, submit: 1 },
          backendCallsTotal: 2,
          backendUnavailable: false,
          error: null,
        },
      },
    });
  });

  test("a hung backend is reported unhealthy after the timeout, not waited on", async () => {
    const h = make({
      backend: fakeBackend({ diagnostics: () => new Promise(() => {}) }),
      diagnosticsTimeoutMs: 20,
    });
    const res = await h.request("/v1/diagnostics");
    expect(res.status).toBe(200);
    const body = (await res.json()) as { backend: { healthy: boolean; message: string } };
    expect(body.backend.healthy).toBe(false);
    expect(body.backend.message).toContain("20 ms");
  });

  test("a throwing backend is reported unhealthy", async () => {
    const h = make({
      backend: fakeBackend({
        diagnostics: async () => {
          throw new Error("boom");
        },
      }),
    });
    const body = (await (await h.request("/v1/diagnostics")).json()) as {
      backend: { healthy: boolean; message: string };
    };
    expect(body.backend).toMatchObject({ healthy: false });
    expect(body.backend.message).toContain("boom");
  });
});

describe("backend health from the reconciler's call watch", () => {
  test("a slow call marks the backend degraded in diagnostics and metrics at once", async () => {
    const h = make();
    h.backendHealth = { kind: "Degraded", message: "a observe call has waited 1500 ms" };
    const body = (await (await h.request("/v1/diagnostics")).json()) as {
      backend: { healthy: boolean; message: string };
    };
    expect(body.backend).toMatchObject({
      healthy: false,
      message: "a observe call has waited 1500 ms",
    });
    const text = await (await h.request("/metrics")).text();
    expect(text).toContain("\nopenai4s_backend_degraded 1\n");
    expect(text).toContain("\nopenai4s_backend_calls_per_second 0.5\n");
    expect(text).toContain('\nopenai4s_backend_calls_total{operation="observe"} 3\n');
    h.backendHealth = { kind: "Healthy" };
    expect(await (await h.request("/metrics")).text()).toContain("\nopenai4s_backend_degraded 0\n");
  });
});

describe("GET /metrics", () => {
  test("Prometheus text: workloads by kind and phase, tick figures, build info, requests", async () => {
    const h = make();
    for (let i = 0; i < 2; i++) {
      await h.post("/v1/workloads", { kind: "BATCH", profile: "default", command: ["true"] });
    }
    await h.request("/v1/workloads/w-none");
    await h.request("/v1/profiles", {}, { kind: "Bearer", token: "t" });
    await h.request("/nowhere");
    h.tick = {
      startedAt: 1_700_000_000_000,
      durationMs: 250,
      backendCalls: { observe: 2, submit: 1 },
      backendCallsTotal: 3,
      backendUnavailable: true,
      error: null,
    };
    const res = await h.request("/metrics");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/plain; version=0.0.4");
    const text = await res.text();
    const lines = text.split("\n");
    expect(lines).toContain('openai4s_build_info{version="9.9.9-test"} 1');
    expect(lines).toContain('openai4s_live_workloads{kind="BATCH",phase="PENDING"} 2');
    expect(lines).toContain('openai4s_live_workloads{kind="SESSION",phase="RUNNING"} 0');
    // Ended workloads are counted as they end, not as a gauge of every row ever stored.
    expect(text).not.toContain('phase="COMPLETED"} 0');
    expect(lines).toContain("openai4s_reconciler_last_tick_duration_seconds 0.25");
    expect(lines).toContain('openai4s_reconciler_last_tick_backend_calls{operation="observe"} 2');
    // A gauge must not end in _total (promtool); sum() over the operations gives it.
    expect(text).not.toContain("openai4s_reconciler_last_tick_backend_calls_total");
    expect(lines).toContain("openai4s_reconciler_last_tick_backend_unavailable 1");
    expect(lines).toContain("openai4s_reconciler_last_tick_timestamp_seconds 1700000000");
    expect(lines).toContain(
      'openai4s_http_requests_total{method="POST",route="/v1/workloads",status="201"} 2',
    );
    // The route pattern, never the id: one series per route, not per workload.
    expect(lines).toContain(
      'openai4s_http_requests_total{method="GET",route="/v1/workloads/:id",status="404"} 1',
    );
    // Refused by authentication: still counted, under the route it asked for.
    expect(lines).toContain(
      'openai4s_http_requests_total{method="GET",route="/v1/profiles",status="401"} 1',
    );
    expect(lines).toContain(
      'openai4s_http_requests_total{method="GET",route="unmatched",status="404"} 1',
    );
    // Request durations by route pattern and method, as a histogram.
    expect(lines).toContain(
      'openai4s_http_request_duration_seconds_count{method="POST",route="/v1/workloads"} 2',
    );
    // Every sample line belongs to a declared family (a histogram's by its suffixes).
    const families = new Set(
      lines.filter((l) => l.startsWith("# TYPE ")).map((l) => l.split(" ")[2]),
    );
    for (const line of lines.filter((l) => l !== "" && !l.startsWith("#"))) {
      const name = line.split(/[{ ]/)[0] ?? "";
      expect(families.has(name) || families.has(name.replace(/_(bucket|sum|count)$/, ""))).toBe(
        true,
      );
      expect(line).toMatch(/^[a-z0-9_]+(\{[^}]*\})? -?[0-9.e+-]+$/);
    }
  });
});

describe("GET /metrics passes promtool check metrics", () => {
  test("every family, histograms and the gauge once named _total included", async () => {
    if (PROMTOOL === null) return skipLine("promtool check metrics (in-process app)");
    const h = make();
    await h.post("/v1/workloads", { kind: "BATCH", profile: "default", command: ["true"] });
    h.tick = {
      startedAt: 1_700_000_000_000,
      durationMs: 250,
      backendCalls: { observe: 2, submit: 1 },
      backendCallsTotal: 3,
      backendUnavailable: false,
      error: null,
    };
    const text = await (await h.request("/metrics")).text();
    const checked = await checkMetrics(text);
    expect(checked.output).toBe("");
    expect(checked.code).toBe(0);
  });
});

describe("histograms exist from start-up", () => {
  test("every profile's queue wait (and a session profile's time to READY) at zero", async () => {
    const text = (await (await make().request("/metrics")).text()).split("\n");
    expect(text).toContain("# TYPE openai4s_queue_wait_seconds histogram");
    expect(text).toContain('openai4s_queue_wait_seconds_count{profile="default"} 0');
    expect(text).toContain('openai4s_queue_wait_seconds_bucket{profile="default",le="+Inf"} 0');
    expect(text).toContain('openai4s_session_time_to_ready_seconds_count{profile="interactive"} 0');
  });
});

describe("backup age", () => {
  test("absent until a backup was read to its end, then counted from that moment", async () => {
    const h = make();
    const before = await (await h.request("/metrics")).text();
    // Absent, not 0: 0 would read as "just backed up" to an alert on the age.
    expect(before).not.toContain("openai4s_backup_age_seconds");
    const res = await h.request("/v1/backup", { method: "POST" });
    expect(res.status).toBe(200);
    expect((await (await h.request("/metrics")).text()).includes("backup_age")).toBe(false);
    await res.arrayBuffer();
    h.clock.advance(90_000);
    const after = (await (await h.request("/metrics")).text()).split("\n");
    expect(after).toContain("openai4s_backup_age_seconds 90");
  });

  test("the last backup's time is kept in the state dir for the next start, never made up", () => {
    const h = make();
    const backup = storeBackup(h.sqlite, stateLayout(h.dir));
    // A restarted daemon reads it (daemon.ts) so the gauge exists from its first scrape.
    expect(backup.lastTakenAt()).toBeNull();
    backup.recordTaken(1_700_000_123_000);
    expect(storeBackup(h.sqlite, stateLayout(h.dir)).lastTakenAt()).toBe(1_700_000_123_000);
    writeFileSync(join(h.dir, "last-backup"), "not a time\n");
    expect(storeBackup(h.sqlite, stateLayout(h.dir)).lastTakenAt()).toBeNull();
  });

  test("a backup read to its end is recorded with its time", async () => {
    const h = make();
    const res = await h.request("/v1/backup", { method: "POST" });
    await res.arrayBuffer();
    expect(storeBackup(h.sqlite, stateLayout(h.dir)).lastTakenAt()).toBe(h.clock.now());
  });
});

describe("metric labels stay bounded", () => {
  test("a method outside the usual seven is counted as other (Bun passes WebDAV's on)", async () => {
    const h = make();
    for (const method of ["PROPFIND", "MKCOL"]) await h.request("/healthz", { method });
    const lines = (await (await h.request("/metrics")).text()).split("\n");
    expect(lines.filter((l) => /PROPFIND|MKCOL/.test(l))).toEqual([]);
    expect(lines).toContain(
      'openai4s_http_requests_total{method="other",route="unmatched",status="405"} 2',
    );
  });
});

describe("GET /openapi.json", () => {
  test("OpenAPI 3.1 documenting exactly the registered routes", async () => {
    const h = make();
    const res = await h.request("/openapi.json");
    expect(res.status).toBe(200);
    const doc = (await res.json()) as {
      openapi: string;
      info: { version: string };
      paths: Record<string, Record<string, unknown>>;
    };
    expect(doc.openapi).toBe("3.1.0");
    expect(doc.info.version).toBe("9.9.9-test");
    const documented = Object.entries(doc.paths)
      .flatMap(([path, ops]) => Object.keys(ops).map((m) => `${m.toUpperCase()} ${path}`))
      .sort();
    const registered = [
      ...new Set(
        h.app.routes
          // The /ui pages are HTML for browsers, not part of the API contract; /mcp speaks
          // MCP's JSON-RPC (docs/agents.md), whose methods OpenAPI cannot describe.
          .filter(
            (r) =>
              r.method !== "ALL" &&
              r.path !== "/ui" &&
              !r.path.startsWith("/ui/") &&
              r.path !== "/mcp",
          )
          .map((r) => `${r.method} ${r.path.replace(/:([A-Za-z]+)(\{[^}]*\})?/g, "{$1}")}`),
      ),
    ].sort();
    expect(documented).toEqual(registered);
    // Every $ref resolves.
    const text = JSON.stringify(doc);
    const schemas = (doc as unknown as { components: { schemas: Record<string, unknown> } })
      .components.schemas;
    for (const [, name] of text.matchAll(/"#\/components\/schemas\/([A-Za-z]+)"/g)) {
      expect(schemas[name as string]).toBeDefined();
    }
  });

  test("the document carries no scheduler vocabulary", () => {
    expect(JSON.stringify(openApiDocument("x"))).not.toMatch(/partition|qos|sbatch|slurm/i);
  });
});

describe("errors", () => {
  test("an unknown route is a 404 problem", async () => {
    const h = make();
    const res = await h.request("/v2/nothing");
    expect(res.status).toBe(404);
    expect((await problemOf(res)).detail).toContain("/v2/nothing");
  });

  test("a bug is a 500 problem that says nothing about internals, and is logged", async () => {
    const h = make({
      backend: fakeBackend({
        profiles: () => {
          throw new Error("secret internal detail");
        },
      }),
    });
    const res = await h.request("/v1/profiles");
    expect(res.status).toBe(500);
    const problem = await problemOf(res);
    expect(JSON.stringify(problem)).not.toContain("secret internal detail");
    expect(h.log.lines.join("")).toContain("secret internal detail");
  });
});

describe("TCP access: bearer token", () => {
  const bearer = { kind: "Bearer", token: "s3cret-token" } as const;

  test.each([
    ["no header", {}],
    ["a wrong token", { Authorization: "Bearer nope" }],
    ["a prefix of the token", { Authorization: "Bearer s3cret" }],
    ["another scheme", { Authorization: "Basic s3cret-token" }],
    ["an empty token", { Authorization: "Bearer " }],
  ])("%s: 401 problem, nothing written", async (_l, headers) => {
    const h = make();
    const res = await h.request(
      "/v1/workloads",
      {
        method: "POST",
        headers: { "Content-Type": "application/json", ...headers },
        body: JSON.stringify({ kind: "BATCH", profile: "default", command: ["true"] }),
      },
      bearer,
    );
    expect(res.status).toBe(401);
    expect(res.headers.get("www-authenticate")).toContain("Bearer");
    expect((await problemOf(res)).type).toBe("urn:openai4s:problem:unauthorized");
    expect(h.rows().workloads).toBe(0);
  });

  test("the right token passes", async () => {
    const h = make();
    const res = await h.request(
      "/healthz",
      { headers: { Authorization: "Bearer s3cret-token" } },
      bearer,
    );
    expect(res.status).toBe(200);
  });

  test("a request without bindings is refused (fail closed)", async () => {
    const h = make();
    expect((await h.app.request("/healthz")).status).toBe(401);
  });
});
