import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { publicMessageRewriter } from "../../src/adapters/backend-slurm/public-messages.ts";

describe("messages leaving the scheduler backend", () => {
  const rewrite = publicMessageRewriter({ values: ["gpu-a100", "interactive", "physics"] });

  test("scheduler refusals lose the vocabulary and the configured names", () => {
    const out = rewrite(
      "sbatch: error: Batch job submission failed: Invalid partition name specified (gpu-a100)",
    );
    expect(out).not.toMatch(/partition/i);
    expect(out).not.toContain("gpu-a100");
    expect(out).toContain("[hidden]");
  });

  test("pending reasons are rewritten", () => {
    expect(rewrite("waiting: QOSMaxJobsPerUserLimit")).toBe("waiting: policyMaxJobsPerUserLimit");
    expect(rewrite("waiting: PartitionDown")).toBe("waiting: placementDown");
  });

  test("a configured name inside a longer word is left alone", () => {
    expect(rewrite("interactive-ish physicsy")).toBe("interactive-ish physicsy");
  });

  test("property: no configured name or scheduler word survives as a token", () => {
    const name = fc.stringMatching(/^[a-z][a-z0-9_-]{1,12}$/);
    fc.assert(
      fc.property(fc.array(name, { minLength: 1, maxLength: 4 }), fc.string(), (names, noise) => {
        const r = publicMessageRewriter({ values: names });
        const message = `${noise} partition=${names.join(",")} qos ${names[0]} (${names.at(-1)})`;
        const out = r(message);
        expect(out).not.toMatch(/partition|qos/i);
        for (const n of names) {
          expect(out).not.toMatch(new RegExp(`(?<![A-Za-z0-9_.-])${n}(?![A-Za-z0-9_-])`));
        }
      }),
    );
  });
});
