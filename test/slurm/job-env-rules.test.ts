/**
 * The scheduler's environment rules hold on the wrapped path. Launches are wrapped (the job's
 * variables become an `env -i NAME=VALUE` argv inside the batch script), so sbatch sees only
 * the daemon's base environment: the broker's own checks never meet a user's variable.
 * These pin the two walls that do: admission (a 400 naming the variable) and the launch
 * wrapper (a Rejected submission, no sbatch call), over the real broker on a fake cluster.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { createSlurmBackend } from "../../src/adapters/backend-slurm/backend.ts";
import { createSlurmBroker } from "../../src/adapters/backend-slurm/broker.ts";
import { plainWrapper } from "../../src/adapters/isolation-bwrap/launch-argv.ts";
import { wrappedBackend } from "../../src/adapters/isolation-bwrap/through-backend.ts";
import { fixedIdentities } from "../../src/adapters/isolation-bwrap/uid-leases.ts";
import { admitWorkload, normalizeSubmission } from "../../src/core/admission.ts";
import type { AdmissionStore } from "../../src/core/ports/admission-store.ts";
import { manualClock } from "../../src/lib/clock.ts";
import { memoryLog } from "../../src/lib/log.ts";
import { fakeCluster } from "../support/fake-slurm-cluster.ts";
import { BASE_PLACEMENT, catalog, command, request } from "../support/slurm-fixtures.ts";
import { makeTempDir, removeDir } from "../support/temp-dir.ts";

const dir = makeTempDir("o4s-env-rules-");
afterAll(() => removeDir(dir));

/** Each a variable the broker refused before wrapping, and a word its refusal must say. */
const HOSTILE: readonly [string, Record<string, string>, RegExp][] = [
  ["an --export keyword after a comma", { X: "1,ALL" }, /comma/],
  ["a newline value", { X: "a\nb" }, /control character/],
  ["a scheduler variable (SLURM_)", { SLURM_NTASKS: "5" }, /reserved for the scheduler/],
  ["a scheduler option (SBATCH_)", { SBATCH_PARTITION: "other" }, /reserved for the scheduler/],
  ["a launcher option (SRUN_)", { SRUN_CPUS_PER_TASK: "9" }, /reserved for the scheduler/],
  ["a quote", { X: "it's" }, /quote/],
];

function wrappedSlurm() {
  const cluster = fakeCluster();
  const slurm = createSlurmBackend({
    broker: createSlurmBroker({ runner: cluster, path: "/usr/bin:/bin" }),
    placements: catalog({ cpu: BASE_PLACEMENT }),
    clock: manualClock(),
    log: memoryLog(),
  });
  const backend = wrappedBackend(slurm, {
    wrapper: plainWrapper(fixedIdentities(null)),
    rankEnv: "SLURM_PROCID",
    baseEnv: { PATH: "/usr/bin:/bin" },
    locate: () => null,
    spoolDir: dir,
  });
  return { cluster, backend, slurm };
}

describe("the wrapped launch path keeps the scheduler's environment rules", () => {
  test.each(HOSTILE)("%s is Rejected before any sbatch", async (_what, env, why) => {
    const { cluster, backend } = wrappedSlurm();
    const bad = request(dir, command(["/bin/true"], env));
    const good = request(dir, command(["/bin/true"], { MODE: "plain" }));
    const results = await backend.submit([bad, good]);
    const refused = results.get(bad.token);
    expect(refused).toMatchObject({ kind: "Rejected", byRequest: true });
    expect(refused?.kind === "Rejected" ? refused.message : "").toMatch(why);
    expect(refused?.kind === "Rejected" ? refused.message : "").toContain(
      Object.keys(env)[0] ?? "?",
    );
    // The other request of the same batch is submitted, wrapped, with its own variable.
    expect(results.get(good.token)?.kind).toBe("Created");
    expect(cluster.count("sbatch")).toBe(1);
    const job = [...cluster.jobs.values()][0];
    expect(job?.comment.startsWith(good.token)).toBe(true);
  });
});

describe("admission on the Slurm backend refuses them with a field naming the variable", () => {
  const store: AdmissionStore = {
    findByIdempotencyKey: () => null,
    create: () => {
      throw new Error("a refused submission must write nothing");
    },
  } as unknown as AdmissionStore;

  test.each(HOSTILE)("%s", async (_what, env, why) => {
    const { backend } = wrappedSlurm();
    const normalized = normalizeSubmission({
      kind: "BATCH",
      profile: "cpu",
      command: ["/bin/true"],
      env,
    });
    if (normalized.kind !== "Normalized") throw new Error("the request itself is well formed");
    const outcome = await admitWorkload(
      { store, backend, newWorkloadId: () => "w-1" },
      normalized.submission,
      null,
    );
    expect(outcome.kind).toBe("Refused");
    if (outcome.kind !== "Refused" || outcome.reason !== "INVALID") throw new Error("not INVALID");
    const name = Object.keys(env)[0] as string;
    expect(outcome.fields.map((f) => f.path)).toEqual([`env.${name}`]);
    expect(outcome.fields[0]?.message).toMatch(why);
  });
});

describe("which refusals say something about the profile", () => {
  test("the request's own arguments: byRequest; the scheduler's refusal: not", async () => {
    const { cluster, backend, slurm } = wrappedSlurm();
    // Refused by the backend's own checks before sbatch runs: a program name that reads as
    // an option, a value the broker will not put on sbatch's environment.
    for (const launch of [command(["-x"]), command(["/bin/true"], { X: "1,ALL" })]) {
      const r = request(dir, launch);
      expect((await slurm.submit([r])).get(r.token)).toMatchObject({
        kind: "Rejected",
        byRequest: true,
      });
    }
    expect(cluster.count("sbatch")).toBe(0);
    cluster.inject("sbatch", {
      kind: "refuse",
      stderr:
        "sbatch: error: Batch job submission failed: Required partition not available (inactive or drain)\n",
    });
    const fine = request(dir, command(["/bin/true"]));
    const refused = (await backend.submit([fine])).get(fine.token);
    expect(refused?.kind).toBe("Rejected");
    expect(refused).not.toHaveProperty("byRequest");
  });
});
