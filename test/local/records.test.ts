/**
 * The pure parts of the local backend: /proc parsing, the record-to-observation mapping, and
 * the durable file primitives. The mapping's one promise is stated as a property: nothing
 * reads as COMPLETED unless an exit record says the job itself exited 0.
 */
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import fc from "fast-check";
import {
  exitObservation,
  type JobSnapshot,
  observationOf,
} from "../../src/adapters/backend-local/job-state.ts";
import { parseProcStat, readBootId, readProcStat } from "../../src/adapters/backend-local/proc.ts";
import {
  EXIT_REASONS,
  type ExitRecord,
  type JobRecord,
  WITHDRAWN_OUTCOMES,
} from "../../src/adapters/backend-local/records.ts";
import { isTerminal } from "../../src/core/models.ts";
import { publishExclusive, writeFileDurable } from "../../src/lib/durable-fs.ts";
import { FAULT_POINT_ENV, faultPointsFromEnv } from "../../src/lib/fault-point.ts";
import { isCompiled, selfCommand } from "../../src/lib/self-command.ts";
import { tempDir } from "../support/temp-dir.ts";

describe("/proc/PID/stat parsing", () => {
  test("fields after a command name containing spaces and parentheses", () => {
    fc.assert(
      fc.property(
        fc.string({ maxLength: 16 }),
        fc.integer({ min: 1, max: 4_194_304 }),
        fc.constantFrom("R", "S", "D", "Z", "T"),
        fc.bigInt({ min: 0n, max: 2n ** 63n }),
        (comm, pid, state, start) => {
          const fields = [state, "1", String(pid), String(pid), "0", "-1"];
          while (fields.length < 19) fields.push("0");
          fields.push(String(start), "1000", "200");
          const parsed = parseProcStat(`${pid} (${comm}) ${fields.join(" ")}\n`);
          expect(parsed).toEqual({
            pid,
            state,
            processGroup: pid,
            session: pid,
            startTicks: String(start),
          });
        },
      ),
    );
  });

  test("this process reads as itself; a nonexistent PID reads as null", () => {
    const self = readProcStat(process.pid);
    expect(self?.pid).toBe(process.pid);
    expect(self?.startTicks).toMatch(/^\d+$/);
    expect(readProcStat(2 ** 22 + 1)).toBeNull();
    expect(readBootId()).toMatch(/^[0-9a-f-]{36}$/);
  });
});

const record: JobRecord = {
  version: 1,
  token: "o4s-00000000000000000000000000",
  allocationId: "a",
  workloadId: "w",
  epoch: 1,
  argv: ["true"],
  env: {},
  cwd: "/tmp",
  allocationDir: "/tmp",
  credentialDir: null,
  stdoutPath: "/tmp/o",
  stderrPath: "/tmp/e",
  timeLimitSeconds: null,
  killGraceMs: 0,
  createdAt: 0,
};

const exitArb: fc.Arbitrary<ExitRecord> = fc.record({
  reason: fc.constantFrom(...EXIT_REASONS),
  exitCode: fc.option(fc.integer({ min: 0, max: 255 }), { nil: null }),
  signal: fc.option(fc.constantFrom("SIGKILL", "SIGTERM", "SIGSEGV"), { nil: null }),
  message: fc.string(),
  startedAt: fc.option(fc.nat(), { nil: null }),
  endedAt: fc.nat(),
});

const identity = { pid: 42, startTicks: "7", bootId: "b" };

const snapshotArb: fc.Arbitrary<Exclude<JobSnapshot, { kind: "Absent" }>> = fc.oneof(
  fc.record({
    kind: fc.constant("Unclaimed" as const),
    record: fc.constant(record),
    cancel: fc.option(fc.record({ requestedAt: fc.nat() }), { nil: null }),
  }),
  fc.record({
    kind: fc.constant("Withdrawn" as const),
    record: fc.constant(record),
    claim: fc.record({
      kind: fc.constant("Withdrawn" as const),
      outcome: fc.constantFrom(...WITHDRAWN_OUTCOMES),
      message: fc.string(),
      at: fc.nat(),
    }),
  }),
  fc.record({
    kind: fc.constant("Claimed" as const),
    record: fc.constant(record),
    claim: fc.constant({ kind: "Supervisor" as const, ...identity, claimedAt: 0 }),
    supervisorAlive: fc.boolean(),
    job: fc.option(fc.constant({ ...identity, startedAt: 1 }), { nil: null }),
    exit: fc.option(exitArb, { nil: null }),
    cancel: fc.option(fc.record({ requestedAt: fc.nat() }), { nil: null }),
    elements: fc.constant(null),
  }),
);

describe("record to observation", () => {
  test("COMPLETED only from an exit record of a job that exited 0 by itself", () => {
    fc.assert(
      fc.property(snapshotArb, (snapshot) => {
        const o = observationOf(snapshot);
        if (o.kind !== "Observed" || o.phase !== "COMPLETED") return;
        expect(snapshot.kind).toBe("Claimed");
        if (snapshot.kind !== "Claimed") return;
        expect(snapshot.exit).toMatchObject({ reason: "EXITED", exitCode: 0, signal: null });
        expect(o.exitCode).toBe(0);
      }),
    );
  });

  test("a dead supervisor without an exit record is LOST / NOT_FOUND_BY_BACKEND", () => {
    fc.assert(
      fc.property(snapshotArb, (snapshot) => {
        if (snapshot.kind !== "Claimed" || snapshot.exit !== null || snapshot.supervisorAlive) {
          return;
        }
        expect(observationOf(snapshot)).toMatchObject({
          phase: "LOST",
          reason: "NOT_FOUND_BY_BACKEND",
        });
      }),
    );
  });

  test("every terminal observation carries a reason; every exit record is terminal", () => {
    fc.assert(
      fc.property(snapshotArb, (snapshot) => {
        const o = observationOf(snapshot);
        if (o.kind !== "Observed") return;
        if (isTerminal(o.phase)) expect(o.reason).not.toBeNull();
        if (snapshot.kind === "Claimed" && snapshot.exit !== null) {
          expect(isTerminal(o.phase)).toBe(true);
        }
      }),
    );
  });

  test("exit reasons map onto the port's phases and reasons", () => {
    const base = { message: "", startedAt: 1, endedAt: 2 };
    const cases: ReadonlyArray<readonly [ExitRecord, Record<string, unknown>]> = [
      [
        { ...base, reason: "EXITED", exitCode: 0, signal: null },
        { phase: "COMPLETED", reason: "EXITED_ZERO", exitCode: 0 },
      ],
      [
        { ...base, reason: "EXITED", exitCode: 2, signal: null },
        { phase: "FAILED", reason: "NONZERO_EXIT", exitCode: 2 },
      ],
      [
        { ...base, reason: "EXITED", exitCode: null, signal: "SIGKILL" },
        { phase: "FAILED", reason: "NONZERO_EXIT", exitCode: 137 },
      ],
      [
        { ...base, reason: "TIME_LIMIT", exitCode: null, signal: "SIGTERM" },
        { phase: "FAILED", reason: "TIME_LIMIT_EXCEEDED", exitCode: 143 },
      ],
      [
        { ...base, reason: "TIME_LIMIT", exitCode: 0, signal: null },
        { phase: "FAILED", reason: "TIME_LIMIT_EXCEEDED", exitCode: 0 },
      ],
      [
        { ...base, reason: "CANCELLED", exitCode: null, signal: "SIGTERM" },
        { phase: "CANCELLED", reason: "USER_CANCELLED" },
      ],
      [
        { ...base, reason: "TERMINATED", exitCode: null, signal: "SIGTERM" },
        { phase: "CANCELLED", reason: "CANCELLED_BY_BACKEND" },
      ],
      [
        { ...base, reason: "LAUNCH_FAILED", exitCode: 127, signal: null },
        { phase: "FAILED", reason: "NONZERO_EXIT", exitCode: 127 },
      ],
    ];
    for (const [exit, expected] of cases) {
      expect(exitObservation(exit)).toMatchObject({ kind: "Observed", ...expected });
    }
  });
});

describe("durable files", () => {
  test("publishExclusive: of several writers exactly one wins, and its content is whole", () => {
    using scratch = tempDir("o4s-durable-");
    const dir = scratch.path;
    const path = join(dir, "claim.json");
    const wins = ["a", "b", "c"].map((who) => publishExclusive(path, who));
    expect(wins).toEqual([true, false, false]);
    expect(readFileSync(path, "utf8")).toBe("a");
    writeFileDurable(join(dir, "x"), "1");
    writeFileDurable(join(dir, "x"), "2");
    expect(readFileSync(join(dir, "x"), "utf8")).toBe("2");
    // No temporary files are left behind.
    expect(readdirSync(dir).sort()).toEqual(["claim.json", "x"]);
  });
});

describe("fault points and self command", () => {
  test("without the variable no point fires; an enabled point dies by SIGKILL", async () => {
    faultPointsFromEnv({}).hit("local.after-spawn");
    faultPointsFromEnv({ [FAULT_POINT_ENV]: "other" }).hit("local.after-spawn");
    const script = `
      import { faultPointsFromEnv } from ${JSON.stringify(join(import.meta.dir, "../../src/lib/fault-point.ts"))};
      const faults = faultPointsFromEnv(process.env);
      faults.hit("not-enabled");
      console.log("before");
      faults.hit("p2");
      console.log("after");
    `;
    const proc = Bun.spawn([process.execPath, "-e", script], {
      env: { ...process.env, [FAULT_POINT_ENV]: "p1, p2" },
      stdout: "pipe",
    });
    await proc.exited;
    expect(proc.signalCode).toBe("SIGKILL");
    expect(await new Response(proc.stdout).text()).toBe("before\n");
  });

  test("compiled binaries re-invoke themselves; source runs re-invoke bun with main.ts", () => {
    expect(isCompiled("/$bunfs/root/openai4s")).toBe(true);
    expect(
      selfCommand({ execPath: "/opt/openai4s", modulePath: "/$bunfs/root/x", sourceEntry: "/s" }),
    ).toEqual(["/opt/openai4s"]);
    const fromSource = selfCommand();
    expect(fromSource[0]).toBe(process.execPath);
    expect(fromSource[1]).toBe(join(import.meta.dir, "../../src/main.ts"));
  });
});
