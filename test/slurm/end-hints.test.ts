/** Why a job ended, in numbers: the usage parser and the explanation built on it. */
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import {
  explainEnding,
  formatDuration,
  moreMemoryProfile,
  needsUsage,
  usagePending,
} from "../../src/adapters/backend-slurm/end-hints.ts";
import {
  type JobUsage,
  parseSize,
  parseUsage,
} from "../../src/adapters/backend-slurm/parse-usage.ts";
import type { ResourceProfile } from "../../src/core/models.ts";
import type { AllocationObservation } from "../../src/core/ports/allocation-backend.ts";

type Observed = Extract<AllocationObservation, { readonly kind: "Observed" }>;

const failed = (reason: Observed["reason"], exitCode: number | null): Observed => ({
  kind: "Observed",
  phase: "FAILED",
  reason,
  message: "FAILED",
  exitCode,
  startedAt: 1,
  endedAt: 2,
});

describe("usage", () => {
  test("reads what 22.05 printed for a job killed for its memory (job and step rows)", () => {
    const parsed = parseUsage("36|50M||1|UNLIMITED\n36.batch||317464K|1|\n");
    expect(parsed).toEqual({
      kind: "Parsed",
      value: [
        {
          jobId: "36",
          requestedMemoryBytes: 50 * 1024 ** 2,
          maxRssBytes: 317464 * 1024,
          elapsedSeconds: 1,
          timeLimitSeconds: null,
        },
      ],
    });
  });

  test("a half-written size reads as unknown, a bad job id makes the answer malformed", () => {
    expect(parseSize("16?")).toBeNull();
    expect(parseSize("2Gn")).toBe(2 * 1024 ** 3);
    expect(parseUsage("x.batch||1K|1|\n").kind).toBe("Malformed");
  });

  test("any text parses to Malformed or to numbers, never throws", () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 200 }), (text) => {
        const parsed = parseUsage(text);
        expect(["Parsed", "Malformed"]).toContain(parsed.kind);
      }),
      { numRuns: 1000 },
    );
  });
});

describe("explanations", () => {
  const usage = {
    jobId: "1",
    requestedMemoryBytes: 50 * 1024 ** 2,
    maxRssBytes: 310 * 1024 ** 2,
    elapsedSeconds: 3604,
    timeLimitSeconds: 3600,
  };

  test("a SIGKILL at the memory request is OUT_OF_MEMORY, with the numbers", () => {
    const o = failed("NONZERO_EXIT", 137);
    expect(needsUsage(o)).toBe(true);
    expect(explainEnding(o, usage)).toMatchObject({
      reason: "OUT_OF_MEMORY",
      message:
        "OUT_OF_MEMORY: used 310 MiB of the 50 MiB asked for: ask for more memory (GET /v1/profiles)",
      exitCode: 137,
    });
  });

  const profile = (name: string, memoryMb: number | null): ResourceProfile => ({
    name,
    description: name,
    kinds: ["BATCH"],
    resources: { nodes: 1, cpus: 1, gpus: 0, memoryMb, timeLimitSeconds: null },
  });

  test("out of memory names the smallest profile with more memory than the job needed", () => {
    const profiles = [
      profile("small", 50),
      profile("huge", 64_000),
      profile("big-mem", 1_000),
      profile("unlimited", null),
      profile("medium", 200),
    ];
    expect(explainEnding(failed("OUT_OF_MEMORY", null), usage, profiles).message).toBe(
      "OUT_OF_MEMORY: used 310 MiB of the 50 MiB asked for: ask for more memory (profile with more memory: big-mem)",
    );
    expect(moreMemoryProfile(profiles, { ...usage, maxRssBytes: 40 * 1024 ** 2 })).toBe("medium");
    // Nothing bigger than what it needed: no profile is named, the numbers stay.
    expect(
      explainEnding(failed("OUT_OF_MEMORY", null), usage, [profile("small", 50)]).message,
    ).toBe(
      "OUT_OF_MEMORY: used 310 MiB of the 50 MiB asked for: ask for more memory (GET /v1/profiles)",
    );
    expect(
      moreMemoryProfile(profiles, { ...usage, requestedMemoryBytes: null, maxRssBytes: null }),
    ).toBeNull();
  });

  test("a SIGKILL well below the request stays a plain failure", () => {
    const o = failed("NONZERO_EXIT", 137);
    expect(explainEnding(o, { ...usage, maxRssBytes: 1024 ** 2 })).toEqual(o);
  });

  test("a time limit says how long it ran of how long it had", () => {
    expect(explainEnding(failed("TIME_LIMIT_EXCEEDED", null), usage).message).toBe(
      "TIME_LIMIT_EXCEEDED: ran 1:00:04 of 1:00:00: raise timeLimitSeconds",
    );
    expect(formatDuration(59)).toBe("0:00:59");
  });

  test("an ordinary exit code needs no usage query", () => {
    expect(needsUsage(failed("NONZERO_EXIT", 3))).toBe(false);
  });
});

describe("a SIGKILLed job waits for both memory figures before it is settled", () => {
  const GRACE_MS = 30_000;
  const killed = failed("NONZERO_EXIT", 137);
  const usage = (requestedMemoryBytes: number | null, maxRssBytes: number | null): JobUsage => ({
    jobId: "36",
    requestedMemoryBytes,
    maxRssBytes,
    elapsedSeconds: 1,
    timeLimitSeconds: null,
  });
  const MiB = 1024 ** 2;
  // endedAt is 2: "now" 1 s after the end is within the grace, 31 s after is past it.
  const soon = 1_002;
  const late = 2 + GRACE_MS;

  test.each([
    ["no usage row yet", undefined],
    [
      "ReqMem but no MaxRSS yet (the step row is written when the step ends)",
      usage(50 * MiB, null),
    ],
    ["MaxRSS but no ReqMem yet (measured reading '16?' for a moment)", usage(null, 60 * MiB)],
    ["neither figure", usage(null, null)],
  ])("within the grace, %s: pending", (_what, u) => {
    expect(usagePending(killed, u, soon, GRACE_MS)).toBe(true);
    // Once the grace is over the ending stands as observed, never waits forever.
    expect(usagePending(killed, u, late, GRACE_MS)).toBe(false);
  });

  test("both figures: settled at once", () => {
    expect(usagePending(killed, usage(50 * MiB, 60 * MiB), soon, GRACE_MS)).toBe(false);
  });

  test("only a SIGKILL waits: another exit code or reason is settled at once", () => {
    expect(usagePending(failed("NONZERO_EXIT", 1), undefined, soon, GRACE_MS)).toBe(false);
    expect(usagePending(failed("TIME_LIMIT_EXCEEDED", 137), undefined, soon, GRACE_MS)).toBe(false);
  });
});
