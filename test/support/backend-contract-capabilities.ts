/**
 * The backend contract's second half: for each field of the capability record, what the
 * capability must do when the backend holds it, and how the core's caller refuses it when
 * the backend does not. Which of the two runs follows what the factory declares, and the
 * first half checks that declaration against the record itself.
 */
import { expect, test } from "bun:test";
import { isTerminal } from "../../src/core/models.ts";
import {
  batchRefusal,
  launchesSandboxed,
  type ObservationCursor,
  type ObservedChange,
  sessionIsolationVerdict,
} from "../../src/core/ports/allocation-backend.ts";
import { placeStep } from "../../src/core/steps.ts";
import {
  type ContractRun,
  RUNNING_WORKLOAD,
  SCRIPTS,
  tickCalls,
  waitForPhase,
  withBareSubject,
} from "./backend-contract-kit.ts";
import { eventually } from "./eventually.ts";

const NONE_DECLARED = "declared, but the record has none";

export function capabilityTests(run: ContractRun): void {
  tasks(run);
  changes(run);
  terminalFacts(run);
  smallCapabilities(run);
}

function tasks({ factory, withSubject, timeoutMs, testMs }: ContractRun): void {
  if (!factory.capabilities.tasks) {
    test("tasks: none, so a step is refused as STEPS_UNSUPPORTED", () =>
      withBareSubject(factory, (s) => {
        expect(placeStep(s.backend, RUNNING_WORKLOAD, [])).toMatchObject({
          kind: "Refused",
          reason: "STEPS_UNSUPPORTED",
        });
      }));
    return;
  }
  test(
    "tasks: a step runs inside the live allocation, and is refused once it ended (INV-4)",
    withSubject(async (s, submit) => {
      const runner = s.backend.capabilities.tasks;
      if (runner === null) throw new Error(NONE_DECLARED);
      const job = await submit(SCRIPTS.runs);
      await waitForPhase(s, job.target, (p) => p === "RUNNING", timeoutMs);
      const step = await runner.runTask(job.target, ["/bin/sh", "-c", "echo step; exit 4"], {
        timeoutMs,
      });
      expect(step).toMatchObject({ kind: "Completed", exitCode: 4, stdout: "step\n" });
      await s.backend.cancel([job.target]);
      await waitForPhase(s, job.target, (p) => isTerminal(p), timeoutMs);
      const after = await runner.runTask(job.target, ["/bin/true"], { timeoutMs });
      expect(after.kind).toBe("Refused");
    }),
    testMs,
  );
}

function changes({ factory, withSubject, timeoutMs, testMs }: ContractRun): void {
  if (!factory.capabilities.changes) {
    test("changes: none, so every tick observes everything", () =>
      withBareSubject(factory, (s) => {
        expect(tickCalls(s.backend).reportsChanges).toBe(false);
      }));
    return;
  }
  test(
    "changes: a feed reports an end that came after its cursor, and refuses a cursor it never gave",
    withSubject(async (s, submit) => {
      const feed = s.backend.capabilities.changes;
      if (feed === null) throw new Error(NONE_DECLARED);
      const job = await submit(SCRIPTS.runs);
      await waitForPhase(s, job.target, (p) => p === "RUNNING", timeoutMs);
      const opened = await feed.observeChanges(null, [job.target]);
      if (opened.kind !== "Observed") throw new Error(`opening: ${JSON.stringify(opened)}`);
      expect(opened.observations.has(job.target.allocationId)).toBe(true);
      let cursor: ObservationCursor = opened.cursor;
      // Ended after the cursor was handed out, so the end must come back as a change.
      await s.backend.cancel([job.target]);
      const seen: ObservedChange[] = [];
      const ended = (c: ObservedChange) =>
        c.target.allocationId === job.target.allocationId &&
        c.observation.kind === "Observed" &&
        c.observation.phase === "CANCELLED";
      await eventually(
        async () => {
          s.advance();
          const next = await feed.observeChanges(cursor, []);
          if (next.kind !== "Observed") throw new Error(`feed: ${JSON.stringify(next)}`);
          cursor = next.cursor;
          seen.push(...next.changes);
          return seen.some(ended);
        },
        { what: "the job's end in the feed", timeoutMs, intervalMs: 100 },
      );
      expect(await feed.observeChanges("never-given" as ObservationCursor, [])).toEqual({
        kind: "CursorExpired",
      });
    }),
    testMs,
  );
}

function terminalFacts({ factory, withSubject, timeoutMs, testMs }: ContractRun): void {
  if (!factory.capabilities.terminalFacts) {
    test("terminalFacts: none, so the sweep asks nothing", () =>
      withBareSubject(factory, async (s) => {
        expect(await tickCalls(s.backend).pendingTerminalFacts()).toBeNull();
      }));
    return;
  }
  test(
    "terminalFacts: an ended job's fact is kept until acknowledged, a live one's never offered",
    withSubject(async (s, submit) => {
      const facts = s.backend.capabilities.terminalFacts;
      if (facts === null) throw new Error(NONE_DECLARED);
      const done = await submit(SCRIPTS.succeeds);
      const live = await submit(SCRIPTS.runs);
      await waitForPhase(s, done.target, (p) => isTerminal(p), timeoutMs);
      await waitForPhase(s, live.target, (p) => p === "RUNNING", timeoutMs);
      const pending = (await facts.pendingTerminalFacts()).map((f) => f.token);
      expect(pending).toContain(done.request.token);
      expect(pending).not.toContain(live.request.token);
      await facts.acknowledgeTerminal(done.request.token);
      const after = (await facts.pendingTerminalFacts()).map((f) => f.token);
      expect(after).not.toContain(done.request.token);
    }),
    testMs,
  );
}

/** The capabilities that answer a question at once: isolation, sandbox, BATCH gate, env. */
function smallCapabilities({ factory }: ContractRun): void {
  const has = factory.capabilities;
  test(`sessionIsolation: ${has.sessionIsolation ? "a verdict" : "none, so no SESSION"}`, () =>
    withBareSubject(factory, async (s) => {
      const verdict = await sessionIsolationVerdict(s.backend);
      if (has.sessionIsolation) expect(["Verified", "Unverified"]).toContain(verdict.kind);
      else
        expect(verdict).toEqual({
          kind: "Unverified",
          message: `backend ${s.backend.name} does not isolate sessions`,
        });
    }));
  test(`launchSandbox: ${has.launchSandbox ? "an answer" : "none, so unsandboxed"}`, () =>
    withBareSubject(factory, (s) => {
      if (has.launchSandbox) expect(typeof launchesSandboxed(s.backend)).toBe("boolean");
      else expect(launchesSandboxed(s.backend)).toBe(false);
    }));
  test(`batchGate: ${has.batchGate ? "a reason or null" : "none, so BATCH is placed"}`, () =>
    withBareSubject(factory, (s) => {
      const refusal = batchRefusal(s.backend);
      if (has.batchGate) expect(refusal === null || refusal.length > 0).toBe(true);
      else expect(refusal).toBeNull();
    }));
  test(`jobEnv: ${has.jobEnv ? "its own variables refused by name" : "none"}`, () =>
    withBareSubject(factory, (s) => {
      const policy = s.backend.capabilities.jobEnv;
      if (!has.jobEnv) return expect(policy).toBeNull();
      const name = factory.refusedEnvName;
      if (policy === null || name === undefined) throw new Error(NONE_DECLARED);
      expect(policy.jobEnvRefusals({ OPENAI4S_CONTRACT_OK: "1" })).toEqual([]);
      const refused = policy.jobEnvRefusals({ OPENAI4S_CONTRACT_OK: "1", [name]: "x" });
      expect(refused.map((r) => r.name)).toEqual([name]);
      expect(refused[0]?.message).toContain(name);
    }));
}
