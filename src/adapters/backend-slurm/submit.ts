/**
 * Submission: a request made into a batch script and sbatch's arguments (the profile's
 * placement, its limit as a ceiling), then one sbatch. A lost answer is Unknown, never a
 * failure: the job may exist.
 */
import { closeSync, constants, mkdirSync, openSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { allocationLogPath } from "../../core/layout.ts";
import { externalHandle, type SubmissionToken } from "../../core/models.ts";
import type { SubmitRequest, SubmitResult } from "../../core/ports/allocation-backend.ts";
import {
  checkResources,
  type EffectiveResources,
  effectiveResources,
} from "../../core/resources.ts";
import { errorCode } from "../../lib/durable-fs.ts";
import { DEFAULT_WARN_BEFORE_LIMIT_SECONDS, type SlurmPlacement } from "./backend-options.ts";
import { type BatchBody, renderBatchScript } from "./batch-script.ts";
import type { BatchSpec } from "./broker-argv.ts";
import { lookupTokens } from "./find-by-token.ts";
import { jobComment } from "./orphan-sweeper.ts";
import type { SlurmContext } from "./slurm-context.ts";
import { RANK_ENV } from "./task-env.ts";

const SCRIPT_NAME = "job.sh";

/** The profile's warning, never more than half the job's whole time. */
function warningSeconds(timeLimitSeconds: number, placement: SlurmPlacement): number | null {
  const wanted = placement.warnBeforeLimitSeconds ?? DEFAULT_WARN_BEFORE_LIMIT_SECONDS;
  if (wanted === 0) return null;
  return Math.max(1, Math.min(wanted, Math.floor(timeLimitSeconds / 2)));
}

type Prepared =
  | { readonly kind: "Ready"; readonly spec: BatchSpec }
  | { readonly kind: "Rejected"; readonly message: string; readonly byRequest?: true }
  | { readonly kind: "Unknown"; readonly message: string };

/** The batch script's body for a launch, and how many nodes it takes. */
function batchBody(
  ctx: SlurmContext,
  launch: SubmitRequest["launch"],
  placement: SlurmPlacement,
): { readonly body: BatchBody; readonly nodes: number } {
  switch (launch.kind) {
    case "COMMAND":
      return {
        body:
          launch.tasks === undefined
            ? { kind: "COMMAND", command: launch.command }
            : {
                kind: "TASKS",
                launcher: ctx.launcher,
                count: launch.tasks.count,
                perNode: launch.tasks.perNode,
                mpi: placement.mpi ?? null,
                owner: launch.tasks.owner ?? null,
                command: launch.command,
              },
        nodes: placement.nodes,
      };
    case "WORKER":
      return {
        body: {
          kind: "WORKER",
          launcher: ctx.launcher,
          ranks: launch.ranks,
          workerCommand: launch.workerCommand,
          rankEnv: RANK_ENV,
        },
        nodes: launch.ranks,
      };
    default: {
      const never: never = launch;
      throw new Error(`unhandled launch ${JSON.stringify(never)}`);
    }
  }
}

/**
 * The asked time limit, else the profile's default; the profile's maximum (its default when
 * it states none) is a ceiling, never raised here.
 */
function timeLimitOf(request: SubmitRequest, placement: SlurmPlacement): number | null {
  const ceiling = placement.maxima?.timeLimitSeconds ?? placement.timeLimitSeconds;
  return request.timeLimitSeconds === null
    ? placement.timeLimitSeconds
    : ceiling === null
      ? request.timeLimitSeconds
      : Math.min(request.timeLimitSeconds, ceiling);
}

/**
 * The request's CPUs, memory and GPUs in place of the profile's defaults, or why not:
 * admission refuses a request over a maximum first; one that got here anyway (a workload
 * admitted before the administrator lowered a maximum) is refused, never run over it.
 */
function resourcesOf(
  request: SubmitRequest,
  placement: SlurmPlacement,
  name: string,
): EffectiveResources | { readonly refused: string } {
  const profile = {
    name,
    resources: placement,
    ...(placement.maxima ? { maxima: placement.maxima } : {}),
  };
  const check = checkResources(profile, request.resources, undefined);
  if (check.kind === "OverMaximum") {
    return { refused: check.fields.map((f) => `${f.path}: ${f.message}`).join("; ") };
  }
  return effectiveResources(placement, request.resources);
}

function prepare(ctx: SlurmContext, request: SubmitRequest): Prepared {
  const placement = ctx.placements.placement(request.profile);
  if (placement === null) {
    return { kind: "Rejected", message: `no such profile: ${JSON.stringify(request.profile)}` };
  }
  const launch = request.launch;
  const resources = resourcesOf(request, placement, request.profile);
  if ("refused" in resources) {
    return { kind: "Rejected", message: resources.refused, byRequest: true };
  }
  const { body, nodes } = batchBody(ctx, launch, placement);
  const rendered = renderBatchScript(body, { array: request.array !== undefined });
  if (rendered.kind === "Invalid") {
    return { kind: "Rejected", message: rendered.message, byRequest: true };
  }
  const timeLimitSeconds = timeLimitOf(request, placement);
  const scriptPath = join(request.allocationDir, SCRIPT_NAME);
  try {
    writeBatchScript(request, scriptPath, rendered.script);
  } catch (error) {
    // Nothing was submitted, but a full disk is not the workload's fault: Unknown sends the
    // caller through findByToken (Absent) and back here, rather than failing the workload.
    return { kind: "Unknown", message: `could not write the batch script: ${String(error)}` };
  }
  return {
    kind: "Ready",
    spec: {
      jobName: request.token,
      comment: jobComment(request.token, ctx.options.ownerId),
      scriptPath,
      workDir: request.workspaceDir,
      stdoutPath: allocationLogPath(request.allocationDir, "stdout"),
      stderrPath: allocationLogPath(request.allocationDir, "stderr"),
      partition: placement.partition,
      qos: placement.qos,
      account: placement.account,
      nodes,
      ...(launch.kind === "COMMAND" && launch.tasks !== undefined
        ? { tasks: { count: launch.tasks.count, perNode: launch.tasks.perNode } }
        : {}),
      // What the workload asked for, else the profile's defaults: the job's own options.
      cpusPerTask: resources.cpus,
      gpusPerNode: resources.gpus,
      memoryMb: resources.memoryMb,
      // The scheduler counts whole minutes: round up, never cut the user's time short.
      timeLimitMinutes:
        timeLimitSeconds === null ? null : Math.max(1, Math.ceil(timeLimitSeconds / 60)),
      warnBeforeLimitSeconds:
        timeLimitSeconds === null ? null : warningSeconds(timeLimitSeconds, placement),
      // The job's whole environment. The launch env may override PATH; the broker refuses
      // credential-shaped names and values that would change the meaning of --export.
      env: { ...ctx.baseJobEnv, ...launch.env },
      array: request.array ?? null,
      ...(request.submitAs === undefined ? {} : { submitAs: request.submitAs }),
    },
  };
}

/**
 * The attempt's preparer made both directories; they are made here only when missing (a
 * caller that prepared nothing), so the usual path is one write: every system call on
 * the way from POST to the controller's queue counts.
 */
function writeBatchScript(request: SubmitRequest, scriptPath: string, script: string): void {
  // Never through a link: an owner's job has its allocation directory given to the owner's
  // account (its logs are opened there as that account), and a link the owner planted as
  // the script's name would have had root write wherever it points.
  try {
    writeNoFollow(scriptPath, script);
    return;
  } catch (error) {
    if (errorCode(error) !== "ENOENT") throw error;
  }
  mkdirSync(request.allocationDir, { recursive: true, mode: 0o700 });
  mkdirSync(request.workspaceDir, { recursive: true, mode: 0o700 });
  writeNoFollow(scriptPath, script);
}

/** Whether the request raised any figure above its profile's default (within its maxima). */
function asksAboveDefaults(ctx: SlurmContext, request: SubmitRequest): boolean {
  const placement = ctx.placements.placement(request.profile);
  if (placement === null) return false;
  const asked = request.resources ?? {};
  const above = (value: number | undefined, base: number | null) =>
    value !== undefined && (base === null || value > base);
  return (
    above(asked.cpus, placement.cpus) ||
    above(asked.memoryMb, placement.memoryMb) ||
    above(asked.gpus, placement.gpus) ||
    (request.timeLimitSeconds !== null &&
      placement.timeLimitSeconds !== null &&
      request.timeLimitSeconds > placement.timeLimitSeconds)
  );
}

async function submitOne(ctx: SlurmContext, request: SubmitRequest): Promise<SubmitResult> {
  const token = request.token;
  const prepared = prepare(ctx, request);
  switch (prepared.kind) {
    case "Rejected":
      return {
        kind: "Rejected",
        token,
        message: prepared.message,
        ...(prepared.byRequest ? { byRequest: true as const } : {}),
      };
    case "Unknown":
      return { kind: "Unknown", token, message: prepared.message };
    case "Ready":
      break;
    default: {
      const never: never = prepared;
      throw new Error(`unhandled preparation ${JSON.stringify(never)}`);
    }
  }
  const result = await ctx.broker.submitBatch(prepared.spec);
  if (result.kind === "Answered") {
    ctx.noteSuccess("sbatch");
    ctx.log.info("submitted", { token, jobId: result.value, allocationId: request.allocationId });
    return { kind: "Created", token, handle: externalHandle(result.value) };
  }
  const error = result.error;
  ctx.noteFailure(error);
  switch (error.kind) {
    case "refused":
      // The scheduler's own words, for the administrator: the workload's message is
      // rewritten for the public ("invalid placement specified: [hidden]"), and a profile
      // that points at a partition the cluster does not have said nothing anywhere else.
      ctx.log.warn("the scheduler refused a submission", {
        profile: request.profile,
        allocationId: request.allocationId,
        exitCode: error.exitCode,
        said: error.message,
      });
      // No exit code: refused by the broker's validation before sbatch ran (this request's
      // arguments), not by the scheduler. Nor is a refusal of figures the workload raised
      // above the profile's defaults (which the dry run at start tested) the profile's: one
      // user asking for GPUs the partition lacks would otherwise degrade it for everyone.
      return {
        kind: "Rejected",
        token,
        message: error.message,
        ...(error.exitCode === null || asksAboveDefaults(ctx, request)
          ? { byRequest: true as const }
          : {}),
      };
    case "timed_out":
    case "unreachable":
    case "malformed":
      // The job may exist: the answer, not the submission, may be what was lost.
      return { kind: "Unknown", token, message: error.message };
    default: {
      const never: never = error.kind;
      throw new Error(`unhandled error kind ${String(never)}`);
    }
  }
}

async function inPool<T, R>(items: readonly T[], limit: number, f: (t: T) => Promise<R>) {
  const results: R[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    for (;;) {
      const i = next++;
      if (i >= items.length) return;
      results[i] = await f(items[i] as T);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}

/**
 * The port's submit: one token lookup for the batch (a fresh token is never asked about),
 * Existing for a token already out there, Unknown when that cannot be told, and one sbatch
 * for each of the rest, a few at a time.
 */
export async function submitAll(
  ctx: SlurmContext,
  requests: readonly SubmitRequest[],
): Promise<Map<SubmissionToken, SubmitResult>> {
  const out = new Map<SubmissionToken, SubmitResult>();
  const unique = new Map<SubmissionToken, SubmitRequest>();
  for (const r of requests) if (!unique.has(r.token)) unique.set(r.token, r);
  if (unique.size === 0) return out;
  // A fresh token was never handed to the scheduler: asking for it could only say Absent.
  const fresh = [...unique.values()].filter((r) => r.freshToken === true);
  const asked = [...unique.keys()].filter((t) => unique.get(t)?.freshToken !== true);
  const lookup = await lookupTokens(ctx, asked);
  for (const r of fresh) lookup.set(r.token, { kind: "Absent" });
  const toSubmit: SubmitRequest[] = [];
  for (const [token, request] of unique) {
    const found = lookup.get(token) ?? { kind: "Unavailable", message: "not looked up" };
    switch (found.kind) {
      case "Found":
        out.set(token, { kind: "Existing", token, handle: externalHandle(found.jobId) });
        break;
      case "Unavailable":
        out.set(token, {
          kind: "Unknown",
          token,
          message: `could not tell whether this submission already exists: ${found.message}`,
        });
        break;
      case "Absent":
        toSubmit.push(request);
        break;
      default: {
        const never: never = found;
        throw new Error(`unhandled lookup ${JSON.stringify(never)}`);
      }
    }
  }
  // In the workloads' order, whatever order the caller found them in: which job id the
  // scheduler hands which submission then does not depend on how a tick walked its rows.
  toSubmit.sort((a, b) => (a.workloadId < b.workloadId ? -1 : a.workloadId > b.workloadId ? 1 : 0));
  const results = await inPool(toSubmit, ctx.submitConcurrency, (r) => submitOne(ctx, r));
  for (const result of results) out.set(result.token, result);
  return out;
}

/** `text` into `path` (created 0700, or truncated), refusing a link there (ELOOP). */
function writeNoFollow(path: string, text: string): void {
  const flags = constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW;
  const fd = openSync(path, flags, 0o700);
  try {
    writeFileSync(fd, text);
  } finally {
    closeSync(fd);
  }
}
