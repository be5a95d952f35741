/**
 * Admission as a rule of the core, run without any web handler: a real (in-memory) SQLite
 * store through its adapter, and a backend that can only list profiles and, when given,
 * answer the isolation check.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { openDatabase } from "../../src/adapters/store-sqlite/index.ts";
import { bindAdmissionStore } from "../../src/adapters/store-sqlite/stores/admission-store.ts";
import {
  type AdmissionOutcome,
  admitWorkload,
  normalizeSubmission,
  requestHash,
  type Submission,
} from "../../src/core/admission.ts";
import { gatedUnsandboxedBatch } from "../../src/core/isolation/batch-gate.ts";
import { mintSubmissionToken } from "../../src/core/models.ts";
import type { AdmissionStore } from "../../src/core/ports/admission-store.ts";
import type {
  AllocationBackend,
  IsolationVerdict,
} from "../../src/core/ports/allocation-backend.ts";
import { manualClock } from "../../src/lib/clock.ts";
import { fakeBackend, PROFILES } from "../support/fake-backend.ts";

/** Only profiles and the isolation question: admission must not move a job. */
function backend(isolation?: () => Promise<IsolationVerdict>): AllocationBackend {
  return fakeBackend(
    isolation ? { capabilities: { sessionIsolation: { verifySessionIsolation: isolation } } } : {},
  );
}

const batch: Submission = {
  kind: "BATCH",
  profile: "default",
  name: "echo",
  spec: { command: ["echo", "hi"] },
  maxAttempts: 1,
};
const session: Submission = {
  kind: "SESSION",
  profile: "interactive",
  name: "session",
  spec: {},
  maxAttempts: 1,
};

const closers: (() => void)[] = [];
afterEach(() => {
  for (const close of closers.splice(0)) close();
});

function world(options: { readonly backend?: AllocationBackend } = {}) {
  const opened = openDatabase(":memory:");
  closers.push(() => opened.close());
  const store = bindAdmissionStore({ db: opened.db, clock: manualClock() });
  let seq = 0;
  const rows = () =>
    (opened.sqlite.query("SELECT count(*) AS n FROM workloads").get() as { n: number }).n;
  const deps = (s: AdmissionStore = store) => ({
    store: s,
    backend: options.backend ?? backend(),
    newWorkloadId: () => `w${++seq}`,
  });
  return { store, rows, deps };
}

function refusal(outcome: AdmissionOutcome) {
  if (outcome.kind !== "Refused") throw new Error(`expected a refusal, got ${outcome.kind}`);
  return outcome;
}

describe("admission", () => {
  test("a submission that fits its profile is admitted and stored PENDING", async () => {
    const w = world();
    const outcome = await admitWorkload(w.deps(), batch, null);
    expect(outcome.kind).toBe("Admitted");
    if (outcome.kind !== "Admitted") return;
    expect(outcome.workload).toMatchObject({ id: "w1", kind: "BATCH", phase: "PENDING" });
    expect(w.rows()).toBe(1);
  });

  test("with attempt ids, the first attempt is minted with the workload (SUBMITTING, epoch 1)", async () => {
    const w = world();
    const token = mintSubmissionToken((n) => new Uint8Array(n).fill(7));
    const outcome = await admitWorkload(
      { ...w.deps(), newAttempt: () => ({ allocationId: "a1", token }) },
      { ...batch, maxAttempts: 3 },
      null,
    );
    if (outcome.kind !== "Admitted") throw new Error(outcome.kind);
    expect(outcome.workload).toMatchObject({
      phase: "SUBMITTING",
      executionEpoch: 1,
      message: "attempt 1 of 3",
    });
    expect(outcome.attempt).toMatchObject({ id: "a1", token, epoch: 1, phase: "SUBMITTING" });
    // Refused before any write: no ids are even asked for.
    let asked = 0;
    const refused = await admitWorkload(
      {
        ...w.deps(),
        newAttempt: () => {
          asked += 1;
          return { allocationId: "a2", token };
        },
      },
      { ...batch, profile: "nope" },
      null,
    );
    expect([refused.kind, asked, w.rows()]).toEqual(["Refused", 0, 1]);
  });

  test("an unknown profile is refused on the profile field, and nothing is written", async () => {
    const w = world();
    const r = refusal(await admitWorkload(w.deps(), { ...batch, profile: "nope" }, null));
    expect(r.reason).toBe("INVALID");
    if (r.reason !== "INVALID") return;
    expect(r.fields).toEqual([
      { path: "profile", message: 'unknown profile "nope" (known: default, interactive)' },
    ]);
    expect(w.rows()).toBe(0);
  });

  test("a kind the profile does not accept and a time limit over its bound: both fields", async () => {
    const w = world();
    const asked: Submission = {
      ...session,
      profile: "default",
      spec: { timeLimitSeconds: 7200 },
    };
    const r = refusal(await admitWorkload(w.deps(), asked, null));
    expect(r.reason === "INVALID" && r.fields.map((f) => f.path)).toEqual([
      "profile",
      "timeLimitSeconds",
    ]);
    expect(w.rows()).toBe(0);
  });

  test.each([
    ["a backend without the isolation capability", undefined],
    [
      "an Unverified verdict",
      async (): Promise<IsolationVerdict> => ({ kind: "Unverified", message: "no sandbox here" }),
    ],
    [
      "a check that throws",
      async (): Promise<IsolationVerdict> => {
        throw new Error("probe crashed");
      },
    ],
  ])("a SESSION on %s is refused ISOLATION_UNAVAILABLE before any write", async (_l, check) => {
    const w = world({ backend: backend(check) });
    const r = refusal(await admitWorkload(w.deps(), session, null));
    expect(r.reason).toBe("ISOLATION_UNAVAILABLE");
    expect(w.rows()).toBe(0);
  });

  test("a BATCH whose job would run unsandboxed as the daemon's uid is refused before any write", async () => {
    const gated = gatedUnsandboxedBatch(
      fakeBackend({ capabilities: { launchSandbox: { launchesSandboxed: () => false } } }),
      {
        jobsKeepDaemonUid: true,
        allowUnsandboxedBatch: false,
      },
    );
    const w = world({ backend: gated });
    const r = refusal(await admitWorkload(w.deps(), batch, null));
    expect(r.reason).toBe("ISOLATION_UNAVAILABLE");
    expect(r.reason === "ISOLATION_UNAVAILABLE" && r.message).toContain(
      "--allow-unsandboxed-batch",
    );
    expect(w.rows()).toBe(0);
  });

  test.each([
    ["the sandbox is verified", { sandboxed: true, keep: true, allow: false }],
    ["the admin opted in", { sandboxed: false, keep: true, allow: true }],
    ["jobs run as another uid (a root daemon)", { sandboxed: false, keep: false, allow: false }],
  ])("a BATCH is admitted when %s", async (_l, c) => {
    const gated = gatedUnsandboxedBatch(
      fakeBackend({ capabilities: { launchSandbox: { launchesSandboxed: () => c.sandboxed } } }),
      {
        jobsKeepDaemonUid: c.keep,
        allowUnsandboxedBatch: c.allow,
      },
    );
    const w = world({ backend: gated });
    expect((await admitWorkload(w.deps(), batch, null)).kind).toBe("Admitted");
  });

  test("a SESSION on a backend that verifies its isolation is admitted", async () => {
    const w = world({
      backend: backend(async () => ({ kind: "Verified", mechanism: "test" })),
    });
    expect((await admitWorkload(w.deps(), session, null)).kind).toBe("Admitted");
  });

  test("the same key with the same request replays the first workload", async () => {
    const w = world();
    const first = await admitWorkload(w.deps(), batch, "k");
    // The same request spelled differently: key order does not change the hash.
    const again = await admitWorkload(
      w.deps(),
      {
        maxAttempts: 1,
        spec: { command: ["echo", "hi"] },
        name: "echo",
        profile: "default",
        kind: "BATCH",
      },
      "k",
    );
    expect(first.kind).toBe("Admitted");
    expect(again.kind).toBe("Replayed");
    expect(again.kind !== "Refused" && again.workload.id).toBe("w1");
    expect(w.rows()).toBe(1);
  });

  test("the same key with a different request is refused, naming the key", async () => {
    const w = world();
    await admitWorkload(w.deps(), batch, "k");
    const r = refusal(await admitWorkload(w.deps(), { ...batch, name: "other" }, "k"));
    expect(r).toEqual({ kind: "Refused", reason: "IDEMPOTENCY_KEY_REUSED", key: "k" });
    expect(w.rows()).toBe(1);
  });

  test("a replay is answered before the profile is checked again", async () => {
    // The admin removed the profile after the first call: the retry still gets its workload.
    const w = world();
    await admitWorkload(w.deps(), batch, "k");
    const noProfiles = { ...backend(), profiles: () => [] };
    const again = await admitWorkload({ ...w.deps(), backend: noProfiles }, batch, "k");
    expect(again.kind).toBe("Replayed");
  });

  describe("two requests racing on one key (the lookup missed the winner's insert)", () => {
    /** The real store, except that the first lookup misses: the other request won the race. */
    const racing = (store: AdmissionStore): AdmissionStore => ({
      findByIdempotencyKey: () => null,
      ownersOf: (ids) => store.ownersOf(ids),
      create: (input) => store.create(input),
    });

    test("the same request: the loser replays the winner's workload", async () => {
      const w = world();
      const winner = await admitWorkload(w.deps(), batch, "race");
      const loser = await admitWorkload(w.deps(racing(w.store)), batch, "race");
      expect(loser.kind).toBe("Replayed");
      expect(winner.kind === "Admitted" && loser.kind === "Replayed").toBe(true);
      expect(loser.kind !== "Refused" && winner.kind !== "Refused" && loser.workload.id).toBe(
        winner.kind !== "Refused" ? winner.workload.id : "",
      );
      expect(w.rows()).toBe(1);
    });

    test("a different request: the loser is refused and writes nothing", async () => {
      const w = world();
      await admitWorkload(w.deps(), batch, "race");
      const loser = await admitWorkload(w.deps(racing(w.store)), { ...batch, name: "b" }, "race");
      expect(refusal(loser).reason).toBe("IDEMPOTENCY_KEY_REUSED");
      expect(w.rows()).toBe(1);
    });
  });

  test("the request hash ignores key order and covers every field", () => {
    const reordered: Submission = {
      spec: { command: ["echo", "hi"] },
      maxAttempts: 1,
      name: "echo",
      kind: "BATCH",
      profile: "default",
    };
    expect(requestHash(reordered)).toBe(requestHash(batch));
    expect(requestHash({ ...batch, maxAttempts: 2 })).not.toBe(requestHash(batch));
  });
});

describe("the kind rules between fields", () => {
  test("a BATCH needs a non-empty program and has no idle timeout", () => {
    expect(
      normalizeSubmission({ kind: "BATCH", profile: "default", idleTimeoutSeconds: 60 }),
    ).toEqual({
      kind: "Refused",
      reason: "INVALID",
      fields: [
        { path: "command", message: "a BATCH workload needs a command" },
        { path: "idleTimeoutSeconds", message: "only a SESSION has an idle timeout" },
      ],
    });
    const empty = normalizeSubmission({ kind: "BATCH", profile: "default", command: [""] });
    expect(empty.kind === "Refused" && empty.fields.map((f) => f.path)).toEqual(["command[0]"]);
  });

  test("a SESSION runs a kernel, not a command", () => {
    const r = normalizeSubmission({ kind: "SESSION", profile: "interactive", command: ["x"] });
    expect(r.kind === "Refused" && r.fields.map((f) => f.path)).toEqual(["command"]);
  });

  test("defaults are spelled out: the name from the program, one attempt, env sorted", () => {
    const r = normalizeSubmission({
      kind: "BATCH",
      profile: "default",
      command: ["/usr/bin/my tool", "x"],
      env: { B: "2", A: "1" },
    });
    expect(r.kind).toBe("Normalized");
    if (r.kind !== "Normalized") return;
    expect(r.submission).toMatchObject({ name: "my-tool", maxAttempts: 1 });
    expect(Object.keys(r.submission.spec.env ?? {})).toEqual(["A", "B"]);
    const session = normalizeSubmission({ kind: "SESSION", profile: "interactive" });
    expect(session.kind === "Normalized" && session.submission.name).toBe("session");
  });
});

describe("admission of tasks (multi-node BATCH)", () => {
  const mpi = {
    name: "mpi",
    description: "Two nodes",
    kinds: ["BATCH", "SESSION"],
    resources: { nodes: 2, cpus: 1, gpus: 0, memoryMb: null, timeLimitSeconds: null },
    maxTasks: 4,
  } as const;
  const withMpi = () => fakeBackend({ profiles: () => [...PROFILES, mpi] });
  const asked = (profile: string, tasks: number): Submission => ({
    ...batch,
    profile,
    spec: { ...batch.spec, tasks },
  });

  test("up to the profile's maxTasks is admitted; over it, or on a one-task profile, refused on tasks", async () => {
    const w = world({ backend: withMpi() });
    expect((await admitWorkload(w.deps(), asked("mpi", 4), null)).kind).toBe("Admitted");
    const over = refusal(await admitWorkload(w.deps(), asked("mpi", 5), null));
    expect(over.reason === "INVALID" && over.fields).toEqual([
      { path: "tasks", message: 'profile "mpi" allows at most 4 tasks' },
    ]);
    // The local backend's profiles set no maxTasks: a multi-task BATCH there is refused.
    const local = refusal(await admitWorkload(w.deps(), asked("default", 2), null));
    expect(local.reason === "INVALID" && local.fields.map((f) => f.path)).toEqual(["tasks"]);
    expect(w.rows()).toBe(1);
  });

  test("tasksPerNode needs tasks and fits in them; a SESSION takes neither; tasks: 1 is the plain form", () => {
    const paths = (request: Parameters<typeof normalizeSubmission>[0]) => {
      const n = normalizeSubmission(request);
      return n.kind === "Refused" ? n.fields.map((f) => f.path) : [];
    };
    const command = ["/bin/true"];
    expect(paths({ kind: "BATCH", profile: "mpi", command, tasksPerNode: 2 })).toEqual([
      "tasksPerNode",
    ]);
    expect(paths({ kind: "BATCH", profile: "mpi", command, tasks: 2, tasksPerNode: 3 })).toEqual([
      "tasksPerNode",
    ]);
    expect(paths({ kind: "SESSION", profile: "mpi", tasks: 2 })).toEqual(["tasks"]);
    const one = normalizeSubmission({ kind: "BATCH", profile: "mpi", command, tasks: 1 });
    const plain = normalizeSubmission({ kind: "BATCH", profile: "mpi", command });
    expect(one.kind === "Normalized" && one.submission.spec).toEqual(
      plain.kind === "Normalized" ? plain.submission.spec : {},
    );
    const two = normalizeSubmission({
      kind: "BATCH",
      profile: "mpi",
      command,
      tasks: 2,
      tasksPerNode: 1,
    });
    expect(two.kind === "Normalized" && two.submission.spec).toEqual({
      command,
      tasks: 2,
      tasksPerNode: 1,
    });
  });
});
