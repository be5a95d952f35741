/**
 * The backend contract: one set of assertions every AllocationBackend must pass, run by
 * `test/contract/*.test.ts` against the local backend, the simulated backend and the real
 * Slurm backend. Each file gives a factory; the `describe` body is this one function, so
 * a behaviour the reconciler relies on cannot hold for one backend and silently not for
 * another (they had their own test files and no shared contract).
 *
 * What every backend owes: submit answers every token, and a second submit of a token is
 * the same job (INV-8); observe answers every target and reaches the job's real end with its
 * exit code; findByToken finds a submitted token and says Absent, definitely, for one never
 * submitted; cancel is idempotent and ends a running job. Its capability record must hold
 * exactly what the factory declares; each capability it holds does its job, and each it
 * lacks is refused the way the core's callers word it (backend-contract-capabilities.ts).
 */
import { describe, expect, test } from "bun:test";
import { type ExternalHandle, isTerminal } from "../../src/core/models.ts";
import type { ObservationTarget, SubmitRequest } from "../../src/core/ports/allocation-backend.ts";
import { capabilityTests } from "./backend-contract-capabilities.ts";
import {
  CAPABILITIES,
  type ContractFactory,
  type ContractSubject,
  contractRun,
  newToken,
  SCRIPTS,
  waitForPhase,
  withBareSubject,
} from "./backend-contract-kit.ts";

export type { ContractFactory, ContractSubject } from "./backend-contract-kit.ts";

export function backendContract(factory: ContractFactory): void {
  const run = contractRun(factory);
  const { timeoutMs, testMs, withSubject } = run;
  const endOf = (s: ContractSubject, t: ObservationTarget) =>
    waitForPhase(s, t, (p) => isTerminal(p), timeoutMs);

  describe(`backend contract: ${factory.name}`, () => {
    test(
      "submit answers every token with a job, and the same token again is the same job",
      withSubject(async (s, submit) => {
        const first = await submit(SCRIPTS.succeeds);
        const again = (await s.backend.submit([first.request])).get(first.request.token);
        expect(again).toMatchObject({ token: first.request.token, handle: first.target.handle });
        expect(["Created", "Existing"]).toContain(again?.kind ?? "none");
        await endOf(s, first.target);
        const jobs = (await s.backend.findByToken([first.request.token])).get(first.request.token);
        expect(jobs).toMatchObject({ kind: "Found", handle: first.target.handle });
      }),
      testMs,
    );

    test(
      "observe answers every target and reaches each job's end with its exit code",
      withSubject(async (s, submit) => {
        const ok = await submit(SCRIPTS.succeeds);
        const bad = await submit(SCRIPTS.fails);
        s.advance();
        const both = await s.backend.observe([ok.target, bad.target]);
        expect(both.kind).toBe("Observed");
        if (both.kind === "Observed") {
          expect([...both.observations.keys()].sort()).toEqual(
            [ok.target.allocationId, bad.target.allocationId].sort(),
          );
        }
        expect(await endOf(s, ok.target)).toMatchObject({
          kind: "Observed",
          phase: "COMPLETED",
          reason: "EXITED_ZERO",
          exitCode: 0,
        });
        expect(await endOf(s, bad.target)).toMatchObject({
          kind: "Observed",
          phase: "FAILED",
          reason: "NONZERO_EXIT",
          exitCode: 3,
        });
      }),
      testMs,
    );

    test(
      "findByToken finds a submitted token, and says Absent for one never submitted",
      withSubject(async (s, submit) => {
        const job = await submit(SCRIPTS.succeeds);
        const never = newToken();
        const found = await s.backend.findByToken([job.request.token, never]);
        expect(found.get(job.request.token)).toMatchObject({
          kind: "Found",
          handle: job.target.handle,
        });
        expect(found.get(never)).toEqual({ kind: "Absent" });
        await endOf(s, job.target);
      }),
      testMs,
    );

    test(
      "cancel ends a running job, and asking twice is harmless",
      withSubject(async (s, submit) => {
        const job = await submit(SCRIPTS.runs);
        await waitForPhase(s, job.target, (p) => p === "RUNNING", timeoutMs);
        const first = await s.backend.cancel([job.target]);
        expect(first.get(job.target.allocationId)).toEqual({ kind: "Requested" });
        const second = await s.backend.cancel([job.target]);
        expect(second.get(job.target.allocationId)).toEqual({ kind: "Requested" });
        expect(await endOf(s, job.target)).toMatchObject({ kind: "Observed", phase: "CANCELLED" });
      }),
      testMs,
    );

    test(`job arrays: ${factory.arrays === true ? "its profile has a limit" : "its profile runs none"}`, () =>
      withBareSubject(factory, (s) => {
        const name = s.request(SCRIPTS.succeeds).profile;
        const limit = s.backend.profiles().find((p) => p.name === name)?.maxArraySize;
        if (factory.arrays === true) expect(limit).toBeGreaterThanOrEqual(3);
        else expect(limit).toBeUndefined();
      }));

    if (factory.arrays === true) {
      test(
        "job arrays: one submission runs every element, one failure names its index (INV-8: the token finds the array)",
        withSubject(async (s) => {
          const script = '[ "$OPENAI4S_ARRAY_INDEX" != 1 ] || exit 3';
          const request = { ...s.request(script), array: { size: 3, maxConcurrent: 2 } };
          const created = (await s.backend.submit([request])).get(request.token);
          if (created?.kind !== "Created") throw new Error(JSON.stringify(created));
          const target = { ...targetOf(request, created.handle), arraySize: 3 };
          try {
            const end = await endOf(s, target);
            expect(end).toMatchObject({ phase: "FAILED", reason: "NONZERO_EXIT", exitCode: 3 });
            if (end.kind !== "Observed") return;
            expect(end.message).toContain("1 of 3 elements failed (index 1)");
            expect(end.array?.counts).toEqual({ COMPLETED: 2, FAILED: 1 });
            const found = (await s.backend.findByToken([request.token])).get(request.token);
            expect(found).toMatchObject({ kind: "Found", handle: created.handle });
          } finally {
            await s.backend.cancel([target]).catch(() => undefined);
          }
        }),
        testMs,
      );
    }

    test("its capability record holds exactly what it declares", () =>
      withBareSubject(factory, (s) => {
        const held = Object.fromEntries(
          CAPABILITIES.map((name) => [name, s.backend.capabilities[name] !== null]),
        );
        expect(held).toEqual({ ...factory.capabilities });
      }));

    describe("each capability it holds does its job; each it lacks is refused", () => {
      capabilityTests(run);
    });
  });
}

function targetOf(request: SubmitRequest, handle: ExternalHandle): ObservationTarget {
  return { allocationId: request.allocationId, token: request.token, handle };
}
