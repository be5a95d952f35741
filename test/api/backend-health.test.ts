/**
 * One verdict on the backend's health (`core/backend-health.ts`), shown alike by every page
 * that shows one: `/v1/diagnostics`, `/metrics` and `/ui/cluster` each once joined the two
 * witnesses (the backend's own report, the reconciler's call watch) in code of their own.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { backendHealthVerdict, type WatchedHealth } from "../../src/core/backend-health.ts";
import { type Harness, harness } from "../support/api-harness.ts";
import { fakeBackend } from "../support/fake-backend.ts";

const open: Harness[] = [];
afterEach(() => {
  for (const h of open.splice(0)) h.close();
});

const HEALTHY: WatchedHealth = { kind: "Healthy" };
const SLOW: WatchedHealth = { kind: "Degraded", message: "a observe call has waited 1500 ms" };

describe("the verdict", () => {
  test.each([
    ["both witnesses healthy", true, HEALTHY, { healthy: true, message: "report" }],
    ["the report alone unhealthy", false, HEALTHY, { healthy: false, message: "report" }],
    ["the watch alone degraded", true, SLOW, { healthy: false, message: SLOW.message }],
    ["both unhealthy: the watch's words", false, SLOW, { healthy: false, message: SLOW.message }],
  ] as const)("%s", (_l, reportHealthy, watched, expected) => {
    expect(backendHealthVerdict({ healthy: reportHealthy, message: "report" }, watched)).toEqual(
      expected,
    );
  });
});

describe("every page shows the one verdict", () => {
  test.each([
    ["both witnesses healthy", true, HEALTHY],
    ["the report alone unhealthy", false, HEALTHY],
    ["the watch alone degraded", true, SLOW],
  ] as const)("%s", async (_l, reportHealthy, watched) => {
    const backend = fakeBackend({
      diagnostics: async () => ({
        backend: "fake",
        healthy: reportHealthy,
        message: reportHealthy ? "all well" : "job records not writable",
        calls: {},
      }),
    });
    const h = harness({ backend });
    open.push(h);
    h.backendHealth = watched;
    const expected = backendHealthVerdict(await backend.diagnostics(), watched);

    const diagnostics = (await (await h.request("/v1/diagnostics")).json()) as {
      backend: { healthy: boolean; message: string };
    };
    expect(diagnostics.backend).toMatchObject(expected);

    const metrics = await (await h.request("/metrics")).text();
    expect(metrics).toContain(`\nopenai4s_backend_degraded ${expected.healthy ? 0 : 1}\n`);

    const page = await (await h.request("/ui/cluster")).text();
    expect(page).toContain(expected.healthy ? ">healthy<" : ">DEGRADED<");
    expect(page).toContain(expected.message);
  });
});
