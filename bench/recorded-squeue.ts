/**
 * A Slurm scheduler without a cluster, for benches: the REAL Slurm backend, broker and parser
 * over a command runner that answers squeue with a recorded listing (the text Slurm 22.05
 * prints for the broker's own `--Format`), so only the subprocess is replaced. What a
 * reconciler tick costs through it is what it costs against a cluster, less the squeue
 * process itself.
 */
import { join } from "node:path";
import { createSlurmBackend, type SlurmBackend } from "../src/adapters/backend-slurm/backend.ts";
import { createSlurmBroker } from "../src/adapters/backend-slurm/broker.ts";
import { withPublicMessages } from "../src/adapters/backend-slurm/public-messages.ts";
import type { AttemptPreparer } from "../src/core/attempt-preparer.ts";
import { systemClock } from "../src/lib/clock.ts";
import { silentLog } from "../src/lib/log.ts";
import type { ProcessOutcome, ProgramRunner } from "../src/lib/process-runner.ts";
import { BASE_PLACEMENT, catalog } from "../test/support/slurm-fixtures.ts";

/** Unix seconds every running row of the listing says it started at. */
const START_S = 1_700_000_000;

export interface RecordedJob {
  readonly id: string;
  readonly name: string;
  readonly comment: string;
  readonly workDir: string;
  running: boolean;
  /** Its line as last rendered, and for which state. */
  rendered?: { readonly running: boolean; readonly line: string };
}

/**
 * A scheduler that answers from a recorded listing. sbatch adds a row; `settle()` renders
 * the listing once after the bench changed rows, outside the measured tick (that is the
 * controller's work, not ours); squeue returns the text as it stands. A row's line is
 * rendered again only when its job changed, so what the measured tick's garbage collector
 * finds of the controller's work is the one new text, as with a real squeue's output.
 */
export function recordedScheduler() {
  const jobs: RecordedJob[] = [];
  let text = "";
  let nextId = 4_000_000;
  const line = (j: RecordedJob) =>
    [
      j.id,
      j.name,
      j.running ? "RUNNING" : "PENDING",
      "0",
      j.running ? String(START_S) : "N/A",
      j.running ? String(START_S + 86_400) : "N/A",
      j.running ? "None" : "Priority",
      j.workDir,
      j.comment,
    ].join("|");
  const exited = (stdout: string): ProcessOutcome => ({
    kind: "Exited",
    exitCode: 0,
    signal: null,
    stdout,
    stderr: "",
    truncated: [],
    durationMs: 0,
  });
  const option = (args: readonly string[], name: string) =>
    args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? "";
  const runner: ProgramRunner = {
    async run(request) {
      switch (request.program) {
        case "sbatch": {
          const id = String(nextId++);
          jobs.push({
            id,
            name: option(request.args, "job-name"),
            comment: option(request.args, "comment"),
            workDir: option(request.args, "chdir"),
            running: false,
          });
          return exited(`${id}\n`);
        }
        case "squeue":
          return exited(text);
        default:
          return exited("");
      }
    },
  };
  return {
    runner,
    jobs,
    settle() {
      text = jobs
        .map((j) => {
          if (j.rendered?.running !== j.running) {
            j.rendered = { running: j.running, line: `${line(j)}\n` };
          }
          return j.rendered.line;
        })
        .join("");
    },
    text: () => text,
  };
}

export function slurmOn(scheduler: ReturnType<typeof recordedScheduler>): SlurmBackend {
  const placements = catalog({ bench: { ...BASE_PLACEMENT, partition: "batch" } });
  // As the daemon builds it (composition/backends.ts): every message rewritten for the public.
  return withPublicMessages(
    createSlurmBackend({
      broker: createSlurmBroker({ runner: scheduler.runner, path: "/usr/bin:/bin" }),
      placements,
      clock: systemClock,
      log: silentLog,
      ownerId: "bench",
    }),
    { values: ["batch"] },
  );
}

/** Real directories for the batch scripts the backend writes (never a path outside `dir`). */
export function preparerIn(dir: string): AttemptPreparer {
  return {
    async prepare(workload, allocation) {
      return {
        kind: "Prepared",
        attempt: {
          launch: { kind: "COMMAND", command: ["true"], env: {} },
          allocationDir: join(dir, "allocations", allocation.id),
          workspaceDir: join(dir, "workspaces", workload.id),
          timeLimitSeconds: null,
        },
      };
    },
  };
}
