/**
 * The local backend's durable job records: one directory per submission token under
 * `STATE/backends/local/jobs/<token>/`. The directory appears by rename of a complete
 * temporary directory, so "the record exists" always means "the whole request is on disk",
 * and it exists BEFORE any process is started: that is what makes `findByToken` a real
 * answer after a daemon restart rather than a guess (INV-8).
 *
 *   record.json   the request: argv, env, cwd, log paths, time limit (written by the backend)
 *   claim.json    who runs it: a supervisor's identity, or the backend's withdrawal (link(2),
 *                 so of racing supervisors exactly one starts the job: exactly-once)
 *   job.json      the job's process group leader identity and start time (supervisor)
 *   exit.json     how it ended (supervisor), written before the supervisor exits
 *   cancel.json   a durable cancel request (backend), so a signal lost in a crash is not a
 *                 cancel lost
 *   elements.jsonl a job array's element starts and ends, appended by its supervisor
 *                 (array-records.ts); exit.json follows once every element has ended
 *   supervisor.log the supervisor's own stdout/stderr: never a pipe to the daemon, which may die
 */
import { readdirSync } from "node:fs";
import { join } from "node:path";
import * as v from "valibot";
import { readTextCapped } from "../../lib/bounded-read.ts";
import { errorCode, writeFileDurable } from "../../lib/durable-fs.ts";

export const JOB_FILES = {
  record: "record.json",
  claim: "claim.json",
  job: "job.json",
  exit: "exit.json",
  cancel: "cancel.json",
  elements: "elements.jsonl",
  supervisorLog: "supervisor.log",
} as const;

export function jobsRoot(backendDir: string): string {
  return join(backendDir, "jobs");
}

export function jobDir(backendDir: string, token: string): string {
  return join(jobsRoot(backendDir), token);
}

const identitySchema = {
  pid: v.pipe(v.number(), v.integer(), v.minValue(1)),
  startTicks: v.pipe(v.string(), v.regex(/^\d+$/)),
  bootId: v.string(),
};

/**
 * What the job is held to and how (see limit-enforcement.ts): the figures from its profile,
 * the cgroup the supervisor creates for it (null without cgroups), and whether its argv is
 * wrapped in prlimit instead. Absent in records written before limits existed.
 */
export const jobLimitsSchema = v.strictObject({
  profile: v.string(),
  memoryBytes: v.nullable(v.pipe(v.number(), v.integer(), v.minValue(1))),
  pidsMax: v.pipe(v.number(), v.integer(), v.minValue(1)),
  cpus: v.nullable(v.pipe(v.number(), v.minValue(0))),
  cgroup: v.nullable(
    v.strictObject({
      version: v.picklist(["v1", "v2"]),
      mount: v.string(),
      dirs: v.pipe(v.array(v.string()), v.minLength(1)),
    }),
  ),
  rlimit: v.boolean(),
  /** The smallest profile with more memory than this one, for an out-of-memory hint. */
  moreMemoryProfile: v.nullable(v.string()),
});
export type JobLimits = v.InferOutput<typeof jobLimitsSchema>;

export const jobRecordSchema = v.strictObject({
  version: v.literal(1),
  token: v.string(),
  allocationId: v.string(),
  workloadId: v.string(),
  epoch: v.number(),
  /** The final argv, already wrapped by the sandbox when there is one. */
  argv: v.pipe(v.array(v.string()), v.minLength(1)),
  /**
   * The environment of the host-side process the supervisor starts (the sandbox or the
   * privilege drop): fixed by the backend, never the request's. The job's own variables are
   * on `argv`, applied inside (see isolation/launch-argv.ts).
   */
  env: v.record(v.string(), v.string()),
  /** The job's own environment, for steps (`runTask`) run beside it. Absent in old records. */
  jobEnv: v.optional(v.record(v.string(), v.string())),
  /** The workload's workspace: the job's working directory. */
  cwd: v.string(),
  /** The daemon's directory for this allocation (logs live here). */
  allocationDir: v.string(),
  /** WORKER launches only: where the per-rank credential files are. */
  credentialDir: v.nullable(v.string()),
  stdoutPath: v.string(),
  stderrPath: v.string(),
  timeLimitSeconds: v.nullable(v.pipe(v.number(), v.minValue(0))),
  /**
   * Seconds before the time limit the job's process group gets SIGURG (the warning a cluster
   * job gets from its scheduler); 0 or absent (older records): none.
   */
  warnBeforeLimitSeconds: v.optional(v.pipe(v.number(), v.minValue(0))),
  /** Between SIGTERM and SIGKILL of the job's group on a time limit or cancel. */
  killGraceMs: v.pipe(v.number(), v.integer(), v.minValue(0)),
  createdAt: v.number(),
  limits: v.optional(jobLimitsSchema),
  /** The profile's network; steps beside the job get the same. Absent in older records: host. */
  network: v.optional(v.picklist(["host", "none"])),
  /**
   * Sandboxed launches: the allocation's directory whose `tmp/` and `shm/` are the job's and
   * its steps' /tmp and /dev/shm. Absent (older records, no sandbox): each launch its own.
   */
  sharedTmpDir: v.optional(v.string()),
  /**
   * A job array (array-records.ts): `size` elements of this one launch, at most
   * `maxConcurrent` at once, run by the one supervisor. `argv` is then NOT under the limits
   * yet: each element gets its own cgroup (`limits` names the array's, suffixed per element).
   */
  array: v.optional(
    v.strictObject({
      size: v.pipe(v.number(), v.integer(), v.minValue(1)),
      maxConcurrent: v.pipe(v.number(), v.integer(), v.minValue(1)),
    }),
  ),
  /** The profile's mounts as resolved for the job; steps beside it get the same. */
  mounts: v.optional(
    v.array(
      v.strictObject({ source: v.string(), target: v.string(), mode: v.picklist(["ro", "rw"]) }),
    ),
  ),
});
export type JobRecord = v.InferOutput<typeof jobRecordSchema>;

export const WITHDRAWN_OUTCOMES = ["CANCELLED", "SUPERVISOR_FAILED"] as const;
export type WithdrawnOutcome = (typeof WITHDRAWN_OUTCOMES)[number];

export const claimSchema = v.variant("kind", [
  v.strictObject({ kind: v.literal("Supervisor"), ...identitySchema, claimedAt: v.number() }),
  /** The backend took the job before any supervisor did, so it never starts. */
  v.strictObject({
    kind: v.literal("Withdrawn"),
    outcome: v.picklist(WITHDRAWN_OUTCOMES),
    message: v.string(),
    at: v.number(),
  }),
]);
export type Claim = v.InferOutput<typeof claimSchema>;
export type SupervisorClaim = Extract<Claim, { readonly kind: "Supervisor" }>;

/** The job's leader; its PID is also its process group id (started with setsid). */
export const jobStartSchema = v.strictObject({ ...identitySchema, startedAt: v.number() });
export type JobStart = v.InferOutput<typeof jobStartSchema>;

export const EXIT_REASONS = [
  /** The job ended by itself. */
  "EXITED",
  /** The supervisor stopped it at its time limit. */
  "TIME_LIMIT",
  /** Stopped because the daemon asked (cancel.json). */
  "CANCELLED",
  /** Stopped because someone else signalled the supervisor (no cancel request). */
  "TERMINATED",
  /** The job's command could not be started. */
  "LAUNCH_FAILED",
  /** It failed (or could not start) while the spool's filesystem was full: not the job's fault. */
  "SPOOL_FULL",
  /** The kernel killed it (or part of it) at its cgroup's memory limit. */
  "OUT_OF_MEMORY",
] as const;
export type ExitReason = (typeof EXIT_REASONS)[number];

export const exitRecordSchema = v.strictObject({
  reason: v.picklist(EXIT_REASONS),
  exitCode: v.nullable(v.number()),
  signal: v.nullable(v.string()),
  message: v.string(),
  startedAt: v.nullable(v.number()),
  endedAt: v.number(),
});
export type ExitRecord = v.InferOutput<typeof exitRecordSchema>;

export const cancelRequestSchema = v.strictObject({ requestedAt: v.number() });
export type CancelRequest = v.InferOutput<typeof cancelRequestSchema>;

/**
 * The most a job file may weigh: a record carries argv and env (bounded by the API's own
 * limits far below this), the others a few numbers. A larger file is not one we wrote.
 */
const JOB_FILE_MAX_BYTES = 4 * 1024 * 1024;

/**
 * Reads and validates one JSON file of a job directory; null when it does not exist. A file
 * over the cap, not a regular file, or not matching its schema throws, like any other
 * corrupt record: the caller reports the job as broken rather than trusting it.
 */
export function readJobFile<T extends v.GenericSchema>(
  dir: string,
  name: string,
  schema: T,
): v.InferOutput<T> | null {
  const path = join(dir, name);
  const read = readTextCapped(path, JOB_FILE_MAX_BYTES);
  switch (read.kind) {
    case "Missing":
      return null;
    case "TooLarge":
      throw new Error(
        `${path} is ${read.sizeBytes} bytes, over ${JOB_FILE_MAX_BYTES}: not a record this backend wrote`,
      );
    case "NotAFile":
      throw new Error(`${path} is not a regular file: not a record this backend wrote`);
    case "Read":
      return v.parse(schema, JSON.parse(read.text));
    default: {
      const never: never = read;
      throw new Error(`unhandled read ${JSON.stringify(never)}`);
    }
  }
}

/**
 * Moving the spool (the state-dir split of issue 8): every path a job record names below
 * `fromPrefix` is rewritten below `toPrefix`, so a job recorded before the move is observed,
 * tailed and stepped into where its files now are. Idempotent; returns how many changed.
 */
export function rewriteRecordPaths(
  backendDir: string,
  fromPrefix: string,
  toPrefix: string,
): number {
  const root = jobsRoot(backendDir);
  const from = fromPrefix.replace(/\/+$/, "");
  const move = (s: string): string =>
    s === from ? toPrefix : s.startsWith(`${from}/`) ? `${toPrefix}${s.slice(from.length)}` : s;
  let changed = 0;
  for (const token of listDirIfExists(root)) {
    if (token.startsWith(".")) continue;
    const dir = join(root, token);
    const record = readJobFile(dir, JOB_FILES.record, jobRecordSchema);
    if (record === null) continue;
    const moved: JobRecord = {
      ...record,
      // bwrap binds in the argv name the old directories too.
      argv: record.argv.map(move),
      cwd: move(record.cwd),
      allocationDir: move(record.allocationDir),
      credentialDir: record.credentialDir === null ? null : move(record.credentialDir),
      stdoutPath: move(record.stdoutPath),
      stderrPath: move(record.stderrPath),
    };
    if (JSON.stringify(moved) === JSON.stringify(record)) continue;
    writeFileDurable(join(dir, JOB_FILES.record), JSON.stringify(moved));
    changed += 1;
  }
  return changed;
}

function listDirIfExists(path: string): readonly string[] {
  try {
    return readdirSync(path);
  } catch (error) {
    if (errorCode(error) === "ENOENT") return [];
    throw error;
  }
}
