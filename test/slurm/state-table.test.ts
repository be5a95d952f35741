/** The state table covers every state the scheduler's manuals list, and nothing else succeeds. */
import { describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { gunzipSync } from "node:zlib";
import fc from "fast-check";
import {
  JOB_STATE_TABLE,
  mapJobState,
  mapPendingReason,
} from "../../src/adapters/backend-slurm/state-table.ts";

/** JOB STATE CODES of `man squeue` and `man sacct` (Slurm 22.05) plus the documented flags. */
const DOCUMENTED = [
  "BOOT_FAIL",
  "CANCELLED",
  "COMPLETED",
  "CONFIGURING",
  "COMPLETING",
  "DEADLINE",
  "FAILED",
  "NODE_FAIL",
  "OUT_OF_MEMORY",
  "PENDING",
  "PREEMPTED",
  "RUNNING",
  "RESV_DEL_HOLD",
  "REQUEUE_FED",
  "REQUEUE_HOLD",
  "REQUEUED",
  "RESIZING",
  "REVOKED",
  "SIGNALING",
  "SPECIAL_EXIT",
  "STAGE_OUT",
  "STOPPED",
  "SUSPENDED",
  "TIMEOUT",
  // Flags of the job-state-codes page (newer releases print them too).
  "EXPEDITING",
  "LAUNCH_FAILED",
  "POWER_UP_NODE",
  "RECONFIG_FAIL",
  "UPDATE_DB",
];

/** The state names in an installed manual page's JOB STATE CODES section, if there is one. */
function statesInManual(page: string): string[] | null {
  const file = `/usr/share/man/man1/${page}.1.gz`;
  if (!existsSync(file)) return null;
  const roff = gunzipSync(readFileSync(file)).toString();
  const start = roff.indexOf('.SH "JOB STATE CODES"');
  if (start < 0) return null;
  const end = roff.indexOf(".SH", start + 4);
  const section = roff.slice(start, end < 0 ? undefined : end);
  return [...section.matchAll(/^\\f[B3][A-Z]{1,3}\s+([A-Z_]+)\\f[RP]/gm)].map((m) => m[1] ?? "");
}

describe("state table", () => {
  test("every documented state has an entry", () => {
    for (const state of DOCUMENTED)
      expect([state, Object.hasOwn(JOB_STATE_TABLE, state)]).toEqual([state, true]);
  });

  test("every state in the installed squeue and sacct manuals has an entry", () => {
    for (const page of ["squeue", "sacct"]) {
      const states = statesInManual(page);
      if (states === null) {
        console.log(`state table: no installed manual for ${page}; the built-in list stands in`);
        continue;
      }
      expect(states.length).toBeGreaterThan(10);
      for (const state of states)
        expect([page, state, Object.hasOwn(JOB_STATE_TABLE, state)]).toEqual([page, state, true]);
    }
  });

  test("the terminal mappings the design fixes", () => {
    const cases: [string, string, object][] = [
      ["COMPLETED", "0:0", { phase: "COMPLETED", reason: "EXITED_ZERO", exitCode: 0 }],
      ["FAILED", "3:0", { phase: "FAILED", reason: "NONZERO_EXIT", exitCode: 3 }],
      ["FAILED", "0:9", { phase: "FAILED", reason: "NONZERO_EXIT", exitCode: 137 }],
      ["FAILED", "0:0", { phase: "FAILED", reason: "NONZERO_EXIT", exitCode: null }],
      ["TIMEOUT", "0:0", { phase: "FAILED", reason: "TIME_LIMIT_EXCEEDED" }],
      ["OUT_OF_MEMORY", "0:125", { phase: "FAILED", reason: "OUT_OF_MEMORY" }],
      ["NODE_FAIL", "0:0", { phase: "FAILED", reason: "NODE_FAILURE" }],
      ["PREEMPTED", "0:0", { phase: "FAILED", reason: "PREEMPTED" }],
      ["BOOT_FAIL", "0:0", { phase: "FAILED", reason: "BOOT_FAILURE" }],
      ["DEADLINE", "0:0", { phase: "FAILED", reason: "DEADLINE_EXCEEDED" }],
      ["CANCELLED by 0", "0:15", { phase: "CANCELLED", message: "CANCELLED by 0" }],
      ["PENDING", "0:0", { phase: "QUEUED" }],
      ["REQUEUED", "0:0", { phase: "QUEUED", reason: "REQUEUED" }],
      ["SUSPENDED", "0:0", { phase: "RUNNING", reason: "SUSPENDED" }],
      ["STOPPED", "0:0", { phase: "RUNNING", reason: "SUSPENDED" }],
      ["COMPLETING", "0:0", { phase: "RUNNING" }],
    ];
    for (const [state, exit, expected] of cases) {
      const [code, signal] = exit.split(":").map(Number);
      expect(mapJobState(state, { code: code ?? 0, signal: signal ?? 0 })).toMatchObject({
        kind: "Mapped",
        ...expected,
      });
    }
    for (const state of ["REVOKED", "UPDATE_DB", "RECONFIG_FAIL"]) {
      expect(mapJobState(state, null)).toMatchObject({
        kind: "Indeterminate",
        unrecognised: false,
      });
    }
  });

  test("a state cut with '+', followed by 'by UID', or in lower case maps like its base", () => {
    // squeue/sacct print "CANCELLED+" when the column cut the word, and "CANCELLED by 1000";
    // either must not turn a known ending into an unrecognised (Indeterminate) one.
    const essence = (m: ReturnType<typeof mapJobState>) =>
      m.kind === "Mapped"
        ? { kind: m.kind, phase: m.phase, reason: m.reason, exitCode: m.exitCode }
        : { kind: m.kind, unrecognised: m.unrecognised };
    const exit = { code: 0, signal: 9 };
    for (const state of Object.keys(JOB_STATE_TABLE)) {
      const base = essence(mapJobState(state, exit));
      for (const raw of [`${state}+`, `${state} by 1000`, `${state}+ by 0`, state.toLowerCase()]) {
        expect([raw, essence(mapJobState(raw, exit))]).toEqual([raw, base]);
      }
    }
    expect(mapJobState("CANCELLED+", exit)).toMatchObject({ kind: "Mapped", phase: "CANCELLED" });
  });

  test("anything not in the table is Indeterminate, never a phase, never COMPLETED", () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 30 }), (raw) => {
        const word = raw.trim().split(/\s+/, 1)[0]?.replace(/\+$/, "").toUpperCase() ?? "";
        const mapping = mapJobState(raw, { code: 0, signal: 0 });
        if (!Object.hasOwn(JOB_STATE_TABLE, word)) {
          expect(mapping).toMatchObject({ kind: "Indeterminate", unrecognised: true });
        }
        if (mapping.kind === "Mapped" && mapping.phase === "COMPLETED")
          expect(word).toBe("COMPLETED");
      }),
      { numRuns: 3000 },
    );
    for (const raw of ["", "?", "__proto__", "constructor", "COMPLETED_ISH", "DONE"]) {
      expect(mapJobState(raw, null).kind).toBe("Indeterminate");
    }
  });
});

describe("pending reasons say what to do", () => {
  // The reasons `man squeue` (22.05) lists that a user meets most, with the action each asks.
  const CASES: readonly (readonly [string, string])[] = [
    ["Resources", "WAITING_FOR_RESOURCES"],
    ["Priority", "WAITING_FOR_RESOURCES"],
    ["None", "WAITING_FOR_RESOURCES"],
    ["BeginTime", "WAITING_FOR_RESOURCES"],
    ["JobHeldAdmin", "HELD"],
    ["JobHeldUser", "HELD"],
    ["ReqNodeNotAvail, UnavailableNodes:n1,n2", "NODES_UNAVAILABLE"],
    ["(ReqNodeNotAvail)", "NODES_UNAVAILABLE"],
    ["NodeDown", "NODES_UNAVAILABLE"],
    [
      "Nodes required for job are DOWN, DRAINED or reserved for jobs in higher priority partitions",
      "NODES_UNAVAILABLE",
    ],
    ["PartitionDown", "NODES_UNAVAILABLE"],
    ["PartitionInactive", "NODES_UNAVAILABLE"],
    ["QOSMaxJobsPerUserLimit", "LIMIT_REACHED"],
    ["QOSGrpCpuLimit", "LIMIT_REACHED"],
    ["AssocGrpJobsLimit", "LIMIT_REACHED"],
    ["AssocMaxWallDurationPerJobLimit", "LIMIT_REACHED"],
    ["JobArrayTaskLimit", "LIMIT_REACHED"],
    ["PartitionTimeLimit", "CANNOT_START"],
    ["PartitionNodeLimit", "CANNOT_START"],
    ["PartitionConfig", "CANNOT_START"],
    ["BadConstraints", "CANNOT_START"],
    ["InvalidQOS", "CANNOT_START"],
    ["InvalidAccount", "CANNOT_START"],
  ];
  for (const [raw, reason] of CASES) {
    test(`${raw} → ${reason}`, () => expect<string>(mapPendingReason(raw)).toBe(reason));
  }

  test("any word at all maps to a waiting reason: a job that waits is never called anything else", () => {
    const waiting = new Set([
      "WAITING_FOR_RESOURCES",
      "HELD",
      "LIMIT_REACHED",
      "NODES_UNAVAILABLE",
      "CANNOT_START",
    ]);
    fc.assert(
      fc.property(fc.string({ maxLength: 80 }), (raw) => {
        expect(waiting.has(mapPendingReason(raw))).toBe(true);
      }),
      { numRuns: 2000 },
    );
  });

  test("a cancellation the daemon did not ask for reads as an administrator's", () => {
    expect(mapJobState("CANCELLED by 1234", { code: 0, signal: 15 })).toMatchObject({
      phase: "CANCELLED",
      reason: "ADMIN_CANCELLED",
    });
  });
});
