/**
 * Per-workload resources through the API (issue 35): a submission's `resources` over the
 * profile's maximum is a 400 naming the field and the bound and writes nothing; within it
 * is admitted; the field's shape is checked; GET /v1/profiles shows defaults and maxima.
 */
import { afterEach, describe, expect, test } from "bun:test";
import type { ResourceProfile } from "../../src/core/models.ts";
import { type Harness, harness, problemOf } from "../support/api-harness.ts";
import { fakeBackend, PROFILES } from "../support/fake-backend.ts";

const BOUNDED: ResourceProfile = {
  name: "bounded",
  description: "Defaults and maxima",
  kinds: ["BATCH"],
  resources: { nodes: 1, cpus: 1, gpus: 0, memoryMb: 1000, timeLimitSeconds: 600 },
  maxima: { cpus: 4, memoryMb: 2000, timeLimitSeconds: 3600 },
};

const open: Harness[] = [];
function make(): Harness {
  const h = harness({ backend: fakeBackend({ profiles: () => [...PROFILES, BOUNDED] }) });
  open.push(h);
  return h;
}
afterEach(() => {
  for (const h of open.splice(0)) h.close();
});

const batch = { kind: "BATCH", profile: "bounded", command: ["true"] };

describe("resources in a submission", () => {
  test("over a maximum: 400 naming the field and the bound, nothing written", async () => {
    const h = make();
    const res = await h.post("/v1/workloads", {
      ...batch,
      resources: { cpus: 5, memoryMb: 300 },
    });
    expect(res.status).toBe(400);
    const problem = await problemOf(res);
    expect(problem.errors).toEqual([
      {
        path: "resources.cpus",
        message: 'profile "bounded" allows at most 4 CPUs per node (asked 5)',
      },
    ]);
    expect(h.rows().workloads).toBe(0);
  });

  test("the time limit is bounded by the maximum, not the default", async () => {
    const h = make();
    expect((await h.post("/v1/workloads", { ...batch, timeLimitSeconds: 3600 })).status).toBe(201);
    const over = await h.post("/v1/workloads", { ...batch, timeLimitSeconds: 3601 });
    expect((await problemOf(over)).errors).toEqual([
      {
        path: "timeLimitSeconds",
        message: 'profile "bounded" allows at most 3600 seconds (asked 3601)',
      },
    ]);
  });

  test("within the maxima: 201, and the workload's view shows what was asked", async () => {
    const h = make();
    const res = await h.post("/v1/workloads", {
      ...batch,
      resources: { cpus: 4, memoryMb: 2000 },
    });
    expect(res.status).toBe(201);
    // The view says what was asked; null is the profile's default.
    const view = (await res.json()) as { resources: unknown };
    expect(view.resources).toEqual({ cpus: 4, memoryMb: 2000, gpus: null });
  });

  test.each([
    ["zero CPUs", { cpus: 0 }, "resources.cpus"],
    ["a fraction of memory", { memoryMb: 1.5 }, "resources.memoryMb"],
    ["memory as a string", { memoryMb: "300M" }, "resources.memoryMb"],
    ["negative GPUs", { gpus: -1 }, "resources.gpus"],
    ["an unknown field", { nodes: 2 }, "resources.nodes"],
  ])("%s is a 400 naming the field", async (_label, resources, path) => {
    const h = make();
    const res = await h.post("/v1/workloads", { ...batch, resources });
    expect(res.status).toBe(400);
    expect((await problemOf(res)).errors.map((e) => e.path)).toContain(path);
    expect(h.rows().workloads).toBe(0);
  });

  test("GET /v1/profiles shows the defaults and the maxima; absent maxima are the defaults", async () => {
    const h = make();
    const listed = (await (await h.request("/v1/profiles")).json()) as {
      profiles: { name: string; resources: Record<string, unknown> }[];
    };
    const byName = new Map(listed.profiles.map((p) => [p.name, p.resources]));
    expect(byName.get("bounded")).toMatchObject({
      cpus: 1,
      memoryMb: 1000,
      gpus: 0,
      timeLimitSeconds: 600,
      maxCpus: 4,
      maxMemoryMb: 2000,
      maxGpus: 0,
      maxTimeLimitSeconds: 3600,
    });
    expect(byName.get("default")).toMatchObject({
      cpus: 2,
      maxCpus: 2,
      memoryMb: null,
      maxMemoryMb: null,
      timeLimitSeconds: 3600,
      maxTimeLimitSeconds: 3600,
    });
  });
});
