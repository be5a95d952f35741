/**
 * Per-workload resources within the profile's bounds (issue 35), as admission decides them:
 * up to a profile's maxima is admitted, over one is refused naming the field and the bound, a
 * profile without maxima takes its defaults as the bound, and a principal's CPU and GPU
 * limits count what was asked rather than the profile's default.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { openDatabase } from "../../src/adapters/store-sqlite/index.ts";
import { bindAdmissionStore } from "../../src/adapters/store-sqlite/stores/admission-store.ts";
import {
  type AdmissionOutcome,
  admitWorkload,
  normalizeSubmission,
  type Submission,
} from "../../src/core/admission.ts";
import type { ResourceProfile } from "../../src/core/models.ts";
import { NO_LIMITS } from "../../src/core/principals.ts";
import { checkResources, effectiveResources } from "../../src/core/resources.ts";
import { manualClock } from "../../src/lib/clock.ts";
import { fakeBackend } from "../support/fake-backend.ts";

const BOUNDED: ResourceProfile = {
  name: "bounded",
  description: "Defaults and maxima",
  kinds: ["BATCH", "SESSION"],
  resources: { nodes: 1, cpus: 1, gpus: 0, memoryMb: 1000, timeLimitSeconds: 600 },
  maxima: { cpus: 8, memoryMb: 4000, gpus: 2, timeLimitSeconds: 3600 },
};
const FIXED: ResourceProfile = {
  name: "fixed",
  description: "Defaults only: each is also the maximum",
  kinds: ["BATCH"],
  resources: { nodes: 1, cpus: 2, gpus: 0, memoryMb: 500, timeLimitSeconds: 600 },
};

const closers: (() => void)[] = [];
afterEach(() => {
  for (const close of closers.splice(0)) close();
});

function world() {
  const opened = openDatabase(":memory:");
  closers.push(() => opened.close());
  const store = bindAdmissionStore({ db: opened.db, clock: manualClock() });
  let seq = 0;
  const deps = {
    store,
    backend: fakeBackend({ profiles: () => [BOUNDED, FIXED] }),
    newWorkloadId: () => `w${++seq}`,
  };
  const held = () =>
    opened.sqlite.query("SELECT id, cpus, gpus FROM workloads ORDER BY id").all() as {
      id: string;
      cpus: number;
      gpus: number;
    }[];
  return { deps, held };
}

function batch(profile: string, spec: Submission["spec"] = {}): Submission {
  return {
    kind: "BATCH",
    profile,
    name: "job",
    spec: { command: ["true"], ...spec },
    maxAttempts: 1,
  };
}

function fields(outcome: AdmissionOutcome) {
  if (outcome.kind !== "Refused" || outcome.reason !== "INVALID") {
    throw new Error(`expected an INVALID refusal, got ${JSON.stringify(outcome)}`);
  }
  return outcome.fields;
}

describe("per-workload resources at admission", () => {
  test("up to each maximum is admitted, and the spec keeps what was asked", async () => {
    const w = world();
    const resources = { cpus: 8, memoryMb: 4000, gpus: 2 };
    const out = await admitWorkload(
      w.deps,
      batch("bounded", { resources, timeLimitSeconds: 3600 }),
      null,
    );
    expect(out.kind).toBe("Admitted");
    if (out.kind !== "Admitted") return;
    expect(out.workload.spec.resources).toEqual(resources);
  });

  test("over a maximum: a refusal naming each field and its bound, and nothing written", async () => {
    const w = world();
    const out = await admitWorkload(
      w.deps,
      batch("bounded", {
        resources: { cpus: 9, memoryMb: 4001, gpus: 3 },
        timeLimitSeconds: 3601,
      }),
      null,
    );
    expect(fields(out)).toEqual([
      {
        path: "resources.cpus",
        message: 'profile "bounded" allows at most 8 CPUs per node (asked 9)',
      },
      {
        path: "resources.memoryMb",
        message: 'profile "bounded" allows at most 4000 MB of memory per node (asked 4001)',
      },
      {
        path: "resources.gpus",
        message: 'profile "bounded" allows at most 2 GPUs per node (asked 3)',
      },
      {
        path: "timeLimitSeconds",
        message: 'profile "bounded" allows at most 3600 seconds (asked 3601)',
      },
    ]);
    expect(w.held()).toEqual([]);
  });

  test("a profile without maxima: its defaults are the bounds, less is fine", async () => {
    const w = world();
    const less = batch("fixed", { resources: { cpus: 1, memoryMb: 300 } });
    expect((await admitWorkload(w.deps, less, null)).kind).toBe("Admitted");
    const more = batch("fixed", { resources: { cpus: 3, memoryMb: 501, gpus: 1 } });
    expect(fields(await admitWorkload(w.deps, more, null)).map((f) => f.path)).toEqual([
      "resources.cpus",
      "resources.memoryMb",
      "resources.gpus",
    ]);
  });

  test("a principal's CPU and GPU limits count what was asked, not the profile's default", async () => {
    const w = world();
    const submitter = { owner: "ada", limits: { ...NO_LIMITS, maxCpus: 10, maxGpus: 2 } };
    const six = batch("bounded", { resources: { cpus: 6, gpus: 1 } });
    expect((await admitWorkload(w.deps, six, null, submitter)).kind).toBe("Admitted");
    // The default (1 CPU) would fit; the 6 asked do not next to the 6 already held.
    const again = await admitWorkload(w.deps, six, null, submitter);
    expect(again).toMatchObject({
      kind: "Refused",
      reason: "OVER_LIMIT",
      limit: "cpus",
      current: 6,
    });
    const plain = batch("bounded");
    expect((await admitWorkload(w.deps, plain, null, submitter)).kind).toBe("Admitted");
    expect(w.held()).toEqual([
      { id: "w1", cpus: 6, gpus: 1 },
      { id: "w3", cpus: 1, gpus: 0 },
    ]);
  });

  test("normalization keeps the asked resources in the spec, and none when none were asked", () => {
    const asked = normalizeSubmission({
      kind: "BATCH",
      profile: "bounded",
      command: ["true"],
      resources: { memoryMb: 300, cpus: 2 },
    });
    expect(asked.kind === "Normalized" && asked.submission.spec.resources).toEqual({
      cpus: 2,
      memoryMb: 300,
    });
    const none = normalizeSubmission({
      kind: "BATCH",
      profile: "bounded",
      command: ["true"],
      resources: {},
    });
    expect(none.kind === "Normalized" && "resources" in none.submission.spec).toBe(false);
  });
});

describe("the resource rule", () => {
  test("what was asked over the defaults; a bound of null bounds nothing", () => {
    expect(effectiveResources(BOUNDED.resources, { memoryMb: 300 })).toEqual({
      nodes: 1,
      cpus: 1,
      memoryMb: 300,
      gpus: 0,
    });
    const unbounded: ResourceProfile = {
      ...FIXED,
      resources: { ...FIXED.resources, memoryMb: null, timeLimitSeconds: null },
    };
    expect(checkResources(unbounded, { memoryMb: 10 ** 6 }, 10 ** 7)).toEqual({ kind: "Fits" });
  });
});
