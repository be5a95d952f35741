/**
 * `check-config --preflight`: asks the scheduler, per profile, whether a job shaped like the
 * profile could ever run (`sbatch --test-only`, which queues nothing), so an impossible
 * profile (a partition that does not exist, more GPUs than any node has) is caught by the
 * administrator before a scientist's job sits in the queue for ever.
 *
 * The argv is the broker's own (probeArgv), with `--parsable` turned into `--test-only` and
 * the script replaced by `--wrap=true`: the request tested is the request that will be made.
 * The call itself goes through the broker too (`testSubmission`), like every scheduler call.
 */

import type { ProgramRunner } from "../../lib/process-runner.ts";
import { createSlurmBroker } from "./broker.ts";
import { isUnreachableMessage } from "./broker-outcomes.ts";
import { type ArgvBuild, type ClusterProfile, probeArgv } from "./profiles.ts";

export type SbatchTestAnswer =
  | {
      readonly kind: "Exited";
      readonly exitCode: number;
      readonly stdout: string;
      readonly stderr: string;
    }
  /** Not on PATH, timed out, killed, or too much output: nothing was said about the profile. */
  | { readonly kind: "NoAnswer"; readonly message: string };

/** Runs `sbatch` with these arguments. */
export type SbatchTestRun = (args: readonly string[]) => Promise<SbatchTestAnswer>;

export type PreflightOutcome = "POSSIBLE" | "IMPOSSIBLE" | "UNANSWERED";

export interface PreflightVerdict {
  readonly profile: string;
  readonly outcome: PreflightOutcome;
  /** The scheduler's own words (first lines), or why there was no answer. */
  readonly detail: string;
}

export function preflightArgv(profile: Pick<ClusterProfile, "placement">): ArgvBuild {
  const built = probeArgv(profile.placement);
  if (built.kind === "Invalid") return built;
  if (!built.argv.includes("--parsable")) {
    throw new Error("the broker's sbatch argv has no --parsable to replace: update preflightArgv");
  }
  return {
    kind: "Valid",
    argv: [...built.argv.map((a) => (a === "--parsable" ? "--test-only" : a)), "--wrap=true"],
  };
}

function summary(text: string): string {
  const lines = text
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l !== "");
  const joined = lines.slice(0, 3).join(" / ");
  return joined.length > 400 ? `${joined.slice(0, 400)}...` : joined;
}

export function judgePreflight(profile: string, answer: SbatchTestAnswer): PreflightVerdict {
  switch (answer.kind) {
    case "NoAnswer":
      return { profile, outcome: "UNANSWERED", detail: answer.message };
    case "Exited": {
      // --test-only reports on stderr either way ("Job N to start at ..." or the refusal).
      const said = summary(`${answer.stderr}\n${answer.stdout}`);
      if (answer.exitCode === 0) {
        return { profile, outcome: "POSSIBLE", detail: said || "accepted" };
      }
      // An unreachable controller says nothing about the profile: not "impossible".
      if (isUnreachableMessage(answer.stderr)) {
        return { profile, outcome: "UNANSWERED", detail: said };
      }
      return { profile, outcome: "IMPOSSIBLE", detail: said || `exit code ${answer.exitCode}` };
    }
    default: {
      const never: never = answer;
      throw new Error(`unhandled answer ${JSON.stringify(never)}`);
    }
  }
}

/** One `sbatch --test-only` per profile, one after another (each takes milliseconds). */
export async function preflightProfiles(
  profiles: readonly Pick<ClusterProfile, "name" | "placement">[],
  run: SbatchTestRun,
): Promise<readonly PreflightVerdict[]> {
  const verdicts: PreflightVerdict[] = [];
  for (const profile of profiles) {
    const argv = preflightArgv(profile);
    if (argv.kind === "Invalid") {
      verdicts.push({ profile: profile.name, outcome: "IMPOSSIBLE", detail: argv.message });
      continue;
    }
    verdicts.push(judgePreflight(profile.name, await run(argv.argv)));
  }
  return verdicts;
}

export interface SbatchTestRunOptions {
  /** Where sbatch is found. */
  readonly path: string;
  readonly slurmConf?: string;
  readonly runner?: ProgramRunner;
  readonly timeoutMs?: number;
}

/**
 * The real sbatch, through the broker like every other scheduler call (INV-9): its argv
 * discipline, its minimal environment, its timeout and output cap, its call count.
 */
export function createSbatchTestRun(options: SbatchTestRunOptions): SbatchTestRun {
  const broker = createSlurmBroker({
    path: options.path,
    ...(options.slurmConf === undefined ? {} : { slurmConf: options.slurmConf }),
    ...(options.runner === undefined ? {} : { runner: options.runner }),
    ...(options.timeoutMs === undefined ? {} : { commandTimeoutMs: options.timeoutMs }),
    maxOutputBytes: 64 * 1024,
  });
  return async (args) => {
    const answer = await broker.testSubmission(args);
    if (answer.kind === "Failed") return { kind: "NoAnswer", message: answer.error.message };
    const { exitCode, stdout, stderr } = answer.value;
    // classifyOutcome already turned an exit by signal (no code) into Failed.
    return { kind: "Exited", exitCode: exitCode ?? 1, stdout, stderr };
  };
}
