/**
 * A fake ProgramRunner that answers sbatch/squeue/sacct/scancel/srun like a tiny Slurm
 * cluster, for what a real cluster cannot produce on demand: timeouts, garbage output, a
 * missing binary, a lost sbatch answer, accounting lag, a job purged from the controller.
 * The real broker runs on top of it, so its argv, classification and parsers are the ones
 * under test. Output formats are the ones measured on Slurm 22.05 (see parse.ts).
 */
import type {
  ProcessOutcome,
  ProcessRequest,
  ProgramRunner,
} from "../../src/lib/process-runner.ts";

export interface FakeJob {
  readonly id: string;
  readonly name: string;
  readonly comment: string;
  state: string;
  /** Raw wait status as squeue prints it (768 = exit 3). */
  waitStatus: number;
  startedAt: number | null;
  endedAt: number | null;
  readonly workDir: string;
  readonly argv: readonly string[];
  /** sbatch's process environment: with --export=ALL, the job's whole environment. */
  readonly env: Readonly<Record<string, string>>;
  /** What the usage query prints for it, as sacct would ("50M", "317464K", seconds, minutes). */
  usage?: {
    readonly reqMem: string;
    readonly maxRss: string;
    readonly elapsedRaw: string;
    readonly timelimitRaw: string;
  };
}

export type Fault =
  | { readonly kind: "timeout" }
  | { readonly kind: "notfound" }
  | { readonly kind: "garbage"; readonly stdout: string }
  | { readonly kind: "unreachable" }
  | { readonly kind: "refuse"; readonly stderr: string }
  /** sbatch only: the job is created, but the caller never hears the answer. */
  | { readonly kind: "lose-answer" };

export interface FakeCluster extends ProgramRunner {
  readonly jobs: Map<string, FakeJob>;
  /** What accounting knows: copied from `jobs` by syncAccounting (accounting lags). */
  readonly accounting: Map<string, { name: string; comment: string; state: string; exit: string }>;
  readonly calls: { program: string; args: readonly string[] }[];
  /** Faults consumed one per call of that program (FIFO). */
  inject(program: string, fault: Fault): void;
  /** A fault for every call of that program until cleared. */
  persist(program: string, fault: Fault | null): void;
  setState(id: string, state: string, waitStatus?: number): void;
  /** Copy the controller's view into accounting (what slurmdbd eventually receives). */
  syncAccounting(options?: { readonly storeComments?: boolean }): void;
  /** The controller forgets the job (MinJobAge passed, or state was lost). */
  purge(id: string): void;
  /** srun's behaviour for the next steps. */
  stepHandler: (argv: readonly string[]) => { exitCode: number; stdout: string; stderr: string };
  count(program: string): number;
}

const UNREACHABLE: Record<string, string> = {
  squeue: "slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n",
  sbatch:
    "sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)\n",
  sacct: "sacct: error: Problem talking to the database: Connection refused\n",
  scancel:
    "scancel: error: Kill job error on job id 1: Unable to contact slurm controller (connect failure)\n",
  srun: "srun: error: Unable to confirm allocation for job 1: Unable to contact slurm controller (connect failure)\n",
};

function option(args: readonly string[], name: string): string | null {
  const prefix = `--${name}=`;
  const found = args.find((a) => a.startsWith(prefix));
  return found === undefined ? null : found.slice(prefix.length);
}

export function fakeCluster(): FakeCluster {
  const jobs = new Map<string, FakeJob>();
  const accounting = new Map<
    string,
    { name: string; comment: string; state: string; exit: string }
  >();
  const calls: { program: string; args: readonly string[] }[] = [];
  const queued = new Map<string, Fault[]>();
  const persistent = new Map<string, Fault>();
  let nextId = 100;

  const exited = (stdout: string, stderr = "", exitCode = 0): ProcessOutcome => ({
    kind: "Exited",
    exitCode,
    signal: null,
    stdout,
    stderr,
    truncated: [],
    durationMs: 1,
  });

  /** Every job of the (one) user, as `--user` lists them; only `--name`'s when given. */
  function squeue(args: readonly string[]): ProcessOutcome {
    const named = option(args, "name");
    const names = named === null ? null : new Set(named.split(","));
    const lines = [...jobs.values()]
      .filter((j) => names === null || names.has(j.name))
      .map((j) =>
        [
          j.id,
          j.name,
          j.state,
          String(j.waitStatus),
          j.startedAt === null ? "N/A" : String(Math.floor(j.startedAt / 1000)),
          j.endedAt === null ? "N/A" : String(Math.floor(j.endedAt / 1000)),
          j.state === "PENDING" ? "Resources" : "None",
          j.workDir,
          j.comment === "" ? "(null)" : j.comment,
        ].join("|"),
      );
    return exited(lines.map((l) => `${l}\n`).join(""));
  }

  /** The usage query (job and step rows): what the controller's jobs asked for and used. */
  function sacctUsage(args: readonly string[]): ProcessOutcome {
    const ids = new Set((option(args, "jobs") ?? "").split(","));
    const lines: string[] = [];
    for (const [id, job] of jobs) {
      if (!ids.has(id) || job.usage === undefined) continue;
      const u = job.usage;
      lines.push(`${id}|${u.reqMem}||${u.elapsedRaw}|${u.timelimitRaw}`);
      lines.push(`${id}.batch||${u.maxRss}|${u.elapsedRaw}|`);
    }
    return exited(lines.map((l) => `${l}\n`).join(""));
  }

  function sacct(args: readonly string[]): ProcessOutcome {
    if (option(args, "format")?.startsWith("JobID,ReqMem")) return sacctUsage(args);
    const ids = option(args, "jobs");
    const names = option(args, "name");
    const idSet = ids === null ? null : new Set(ids.split(","));
    const nameSet = names === null ? null : new Set(names.split(","));
    const lines: string[] = [];
    for (const [id, row] of accounting) {
      if (idSet !== null && !idSet.has(id)) continue;
      if (nameSet !== null && !nameSet.has(row.name)) continue;
      lines.push(
        [
          id,
          row.name,
          row.state,
          row.exit,
          "1700000000",
          "1700000001",
          "Unknown",
          row.comment,
        ].join("|"),
      );
    }
    return exited(lines.map((l) => `${l}\n`).join(""));
  }

  function sbatch(
    args: readonly string[],
    env: Readonly<Record<string, string>>,
  ): { outcome: ProcessOutcome; id: string } {
    const id = String(nextId++);
    jobs.set(id, {
      id,
      name: option(args, "job-name") ?? "sbatch",
      comment: option(args, "comment") ?? "",
      state: "PENDING",
      waitStatus: 0,
      startedAt: null,
      endedAt: null,
      workDir: option(args, "chdir") ?? "/",
      argv: args,
      env,
    });
    return { outcome: exited(`${id}\n`), id };
  }

  const cluster: FakeCluster = {
    jobs,
    accounting,
    calls,
    stepHandler: () => ({ exitCode: 0, stdout: "", stderr: "" }),
    inject(program, fault) {
      const list = queued.get(program) ?? [];
      list.push(fault);
      queued.set(program, list);
    },
    persist(program, fault) {
      if (fault === null) persistent.delete(program);
      else persistent.set(program, fault);
    },
    setState(id, state, waitStatus = 0) {
      const job = jobs.get(id);
      if (!job) throw new Error(`no fake job ${id}`);
      job.state = state;
      job.waitStatus = waitStatus;
      if (state === "RUNNING" && job.startedAt === null) job.startedAt = 1_700_000_000_000;
      if (!["PENDING", "RUNNING", "COMPLETING", "SUSPENDED"].includes(state)) {
        job.endedAt = 1_700_000_100_000;
      }
    },
    syncAccounting(options = {}) {
      for (const job of jobs.values()) {
        const ended = job.endedAt !== null;
        const code = job.waitStatus >> 8;
        const signal = job.waitStatus & 0x7f;
        accounting.set(job.id, {
          name: job.name,
          // Comment reaches accounting only with job_comment, and only once the job ended.
          comment: options.storeComments !== false && ended ? job.comment : "",
          state: job.state === "CANCELLED" ? "CANCELLED by 0" : job.state,
          exit: `${code}:${signal}`,
        });
      }
    },
    purge(id) {
      jobs.delete(id);
    },
    count(program) {
      return calls.filter((c) => c.program === program).length;
    },
    async run(request: ProcessRequest): Promise<ProcessOutcome> {
      const program = request.program;
      calls.push({ program, args: request.args });
      const fault = queued.get(program)?.shift() ?? persistent.get(program);
      if (fault !== undefined) {
        switch (fault.kind) {
          case "timeout":
            return { kind: "TimedOut", stdout: "", stderr: "", durationMs: request.timeoutMs };
          case "notfound":
            return { kind: "NotFound", message: `${program}: no such command on PATH` };
          case "garbage":
            return exited(fault.stdout);
          case "unreachable":
            return exited("", UNREACHABLE[program] ?? "error: Connection refused\n", 1);
          case "refuse":
            return exited("", fault.stderr, 1);
          case "lose-answer": {
            sbatch(request.args, request.env);
            return { kind: "TimedOut", stdout: "", stderr: "", durationMs: request.timeoutMs };
          }
          default: {
            const never: never = fault;
            throw new Error(`unhandled fault ${JSON.stringify(never)}`);
          }
        }
      }
      switch (program) {
        case "squeue":
          return squeue(request.args);
        case "sacct":
          return sacct(request.args);
        case "sbatch":
          return sbatch(request.args, request.env).outcome;
        case "scancel":
          for (const id of request.args) {
            const job = jobs.get(id);
            if (job && ["PENDING", "RUNNING"].includes(job.state))
              cluster.setState(id, "CANCELLED", 15);
          }
          return exited("");
        case "srun": {
          const dash = request.args.indexOf("--");
          const r = cluster.stepHandler(request.args.slice(dash + 1));
          return exited(r.stdout, r.stderr, r.exitCode);
        }
        default:
          return { kind: "NotFound", message: `${program}: no such command on PATH` };
      }
    },
  };
  return cluster;
}
