/**
 * A job array at admission: BATCH only, within its profile's limit, its cap within the
 * array, each refusal naming its field and writing nothing; an admitted array's attempts are
 * minted with the array's size (what the backend reads them as).
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
import { mintSubmissionToken, type ResourceProfile } from "../../src/core/models.ts";
import { manualClock } from "../../src/lib/clock.ts";
import { fakeBackend } from "../support/fake-backend.ts";

const PROFILES: readonly ResourceProfile[] = [
  {
    name: "sweep",
    description: "runs arrays",
    kinds: ["BATCH"],
    resources: { nodes: 1, cpus: 1, gpus: 0, memoryMb: null, timeLimitSeconds: null },
    maxArraySize: 1001,
  },
  {
    name: "plain",
    description: "runs no arrays",
    kinds: ["BATCH"],
    resources: { nodes: 1, cpus: 1, gpus: 0, memoryMb: null, timeLimitSeconds: null },
  },
];

const closers: (() => void)[] = [];
afterEach(() => {
  for (const close of closers.splice(0)) close();
});

function world() {
  const opened = openDatabase(":memory:");
  closers.push(() => opened.close());
  const store = bindAdmissionStore({ db: opened.db, clock: manualClock() });
  const rows = () =>
    (opened.sqlite.query("SELECT count(*) AS n FROM workloads").get() as { n: number }).n;
  const token = mintSubmissionToken((n) => new Uint8Array(n).fill(3));
  const admit = (submission: Submission): Promise<AdmissionOutcome> =>
    admitWorkload(
      {
        store,
        backend: fakeBackend({ profiles: () => PROFILES }),
        newWorkloadId: () => "w1",
        newAttempt: () => ({ allocationId: "a1", token }),
      },
      submission,
      null,
    );
  return { admit, rows, sqlite: opened.sqlite };
}

const sweep = (spec: Submission["spec"]): Submission => ({
  kind: "BATCH",
  profile: "sweep",
  name: "sweep",
  spec: { command: ["true"], ...spec },
  maxAttempts: 1,
});

function refusedFields(outcome: AdmissionOutcome) {
  if (outcome.kind !== "Refused" || outcome.reason !== "INVALID") {
    throw new Error(`expected INVALID, got ${outcome.kind}`);
  }
  return outcome.fields.map((f) => f.path);
}

describe("job arrays at admission", () => {
  test("an array is minted with its size; a single job with none", async () => {
    const w = world();
    const outcome = await w.admit(sweep({ array: 1000, maxConcurrent: 10 }));
    if (outcome.kind !== "Admitted") throw new Error(outcome.kind);
    expect(outcome.workload.spec).toMatchObject({ array: 1000, maxConcurrent: 10 });
    expect(outcome.attempt?.arraySize).toBe(1000);
    expect(w.sqlite.query("SELECT array_size FROM allocations").get()).toEqual({
      array_size: 1000,
    });
    const single = world();
    const plain = await single.admit(sweep({}));
    if (plain.kind !== "Admitted") throw new Error(plain.kind);
    expect(plain.attempt).not.toHaveProperty("arraySize");
  });

  test("over the profile's limit, a cap over the array, or a profile without arrays", async () => {
    const w = world();
    expect(refusedFields(await w.admit(sweep({ array: 1002 })))).toEqual(["array"]);
    expect(refusedFields(await w.admit(sweep({ array: 10, maxConcurrent: 11 })))).toEqual([
      "maxConcurrent",
    ]);
    expect(refusedFields(await w.admit({ ...sweep({ array: 2 }), profile: "plain" }))).toEqual([
      "array",
    ]);
    expect(w.rows()).toBe(0);
  });

  test("only a BATCH is an array, and a cap needs an array", () => {
    const s = normalizeSubmission({ kind: "SESSION", profile: "sweep", array: 2 });
    expect(s.kind === "Refused" ? s.fields.map((f) => f.path) : s.kind).toEqual(["array"]);
    const b = normalizeSubmission({
      kind: "BATCH",
      profile: "sweep",
      command: ["true"],
      maxConcurrent: 2,
    });
    expect(b.kind === "Refused" ? b.fields.map((f) => f.path) : b.kind).toEqual(["maxConcurrent"]);
  });
});
