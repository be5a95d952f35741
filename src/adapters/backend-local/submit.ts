/**
 * A submission on this machine: the request checked, its directories made below the spool
 * and given to the job's identity (the allocation's shared /tmp and /dev/shm with them when
 * sandboxed), the record written durably, then the supervisor started. Every answer is the
 * port's: Created, Existing (the retry after an Unknown), Rejected or Unknown.
 */

import { AccountUnusableError } from "../../core/accounts.ts";
import type { SubmissionToken } from "../../core/models.ts";
import { externalHandle } from "../../core/models.ts";
import type { SubmitRequest, SubmitResult } from "../../core/ports/allocation-backend.ts";
import type { RunAs } from "../../core/sandbox.ts";
import { chownDirBeneath, makeDirsBeneath } from "../../lib/beneath-fs.ts";
import { nextTurn } from "../../lib/clock.ts";
import { boundMount } from "../../lib/mount-sources.ts";
import { LOCAL_FAULT_POINTS } from "./backend-options.ts";
import { buildJobRecord, sharedTmpDir, sharedTmpSubdirs, validateLaunch } from "./launch.ts";
import type { LocalContext } from "./local-context.ts";
import { createRecordDurably, withdraw } from "./record-store.ts";
import { type JobRecord, jobDir } from "./records.ts";
import { look, startSupervisor } from "./supervisors.ts";

/**
 * The allocation's /tmp and /dev/shm (launch.ts's sharedTmpDir), made below the spool with
 * no link followed and given to the job's identity: the job and its steps write there.
 */
export function prepareSharedTmp(
  ctx: LocalContext,
  allocationDir: string,
  runAs: RunAs | null,
): void {
  const subdirs = sharedTmpSubdirs(sharedTmpDir(allocationDir));
  makeDirsBeneath(ctx.options.spoolDir, subdirs, { mode: 0o700 });
  if (runAs === null) return;
  for (const dir of subdirs) chownDirBeneath(ctx.options.spoolDir, dir, runAs);
}

/** What a submission needs once its directories and record are ready to be written. */
export interface ReadySubmission {
  readonly kind: "Ready";
  readonly dir: string;
  readonly record: JobRecord;
}

/**
 * The synchronous part of a submission: the request checked, an earlier record looked for,
 * the directories made and the record built. Anything but Ready is the answer already.
 */
export function readySubmission(
  ctx: LocalContext,
  request: SubmitRequest,
): SubmitResult | ReadySubmission {
  const token = request.token;
  const problem = validateLaunch(
    request,
    ctx.profileList,
    ctx.sandbox !== undefined,
    ctx.options.workerSocket ?? null,
  );
  // This backend's own check, before anything runs: the request's answer, at once. Counted
  // by the profile's breaker it would wait a back-off for a verdict no scheduler gives.
  if (problem !== null) return { kind: "Rejected", token, message: problem, byRequest: true };
  const handle = externalHandle(token);
  const dir = jobDir(ctx.backendDir, token);
  // Asked first, so the retry after an Unknown returns Existing instead of a second job.
  try {
    if (look(ctx, token, true).kind === "Present") return { kind: "Existing", token, handle };
  } catch (error) {
    return { kind: "Unknown", token, message: `cannot read the job record: ${String(error)}` };
  }
  let runAs: RunAs | null;
  try {
    makeDirsBeneath(ctx.options.spoolDir, [request.workspaceDir, request.allocationDir], {
      mode: 0o700,
    });
    const launch = request.launch;
    runAs = ctx.wrapper.prepare({
      spoolDir: ctx.options.spoolDir,
      workspaceDir: request.workspaceDir,
      credentialDir: launch.kind === "WORKER" ? launch.credentialDir : null,
      subject: { profile: request.profile, owner: request.owner ?? null },
    });
    if (ctx.wrapper.sandboxed) prepareSharedTmp(ctx, request.allocationDir, runAs);
  } catch (error) {
    // The owner's account alone is at fault: that workload fails, the profile is not blamed.
    if (error instanceof AccountUnusableError) {
      return { kind: "Rejected", token, message: error.message, reason: "ACCOUNT_UNUSABLE" };
    }
    return { kind: "Rejected", token, message: `cannot prepare directories: ${String(error)}` };
  }
  try {
    return { kind: "Ready", dir, record: buildRecord(ctx, request, runAs) };
  } catch (error) {
    return { kind: "Rejected", token, message: `cannot prepare the launch: ${String(error)}` };
  }
}

function buildRecord(ctx: LocalContext, request: SubmitRequest, runAs: RunAs | null): JobRecord {
  const declared = ctx.profileList.find((p) => p.name === request.profile)?.mounts ?? [];
  const mounts = declared.map((m) => {
    const bound = boundMount(m, runAs?.account ?? null, ctx.mountForbidden);
    if ("error" in bound) throw new Error(bound.error);
    return bound;
  });
  return buildJobRecord(
    request,
    {
      wrapper: ctx.wrapper,
      baseEnv: ctx.baseEnv,
      profiles: ctx.profileList,
      killGraceMs: ctx.killGraceMs,
      sandboxReadOnly: ctx.sandboxReadOnly,
      now: ctx.clock.now(),
      limits: ctx.limits,
      workerSocket: ctx.options.workerSocket ?? null,
      host: ctx.host,
    },
    runAs,
    mounts,
  );
}

/**
 * The record written durably (its fsyncs off the daemon's thread, createRecordDurably),
 * then the supervisor started: a start never waits for another's, only for its own record.
 */
export async function startSubmission(
  ctx: LocalContext,
  request: SubmitRequest,
  ready: ReadySubmission,
): Promise<SubmitResult> {
  const token = request.token;
  const handle = externalHandle(token);
  const { dir, record } = ready;
  try {
    if ((await createRecordDurably(ctx, dir, record)) === "Exists") {
      return { kind: "Existing", token, handle };
    }
  } catch (error) {
    // The rename may or may not have reached the disk: only findByToken can say.
    return { kind: "Unknown", token, message: `cannot record the job: ${String(error)}` };
  }
  ctx.faults.hit(LOCAL_FAULT_POINTS.afterRecordBeforeSpawn);
  try {
    startSupervisor(ctx, token, dir);
  } catch (error) {
    const message = `cannot start the supervisor: ${String(error)}`;
    if (withdraw(ctx, dir, "SUPERVISOR_FAILED", message))
      return { kind: "Rejected", token, message };
    // Someone else's supervisor claimed it in the meantime: it is running.
    return { kind: "Created", token, handle };
  }
  ctx.faults.hit(LOCAL_FAULT_POINTS.afterSpawn);
  ctx.log.info("local job submitted", { token, allocationId: request.allocationId });
  return { kind: "Created", token, handle };
}

/**
 * A batch of submissions: each one's synchronous part in turn, with a turn of the event
 * loop between them (the API answers meanwhile), and every record's write and supervisor
 * start under way together.
 */
export async function submitAll(
  ctx: LocalContext,
  requests: readonly SubmitRequest[],
): Promise<Map<SubmissionToken, SubmitResult>> {
  const results = new Map<SubmissionToken, SubmitResult>();
  const started: Promise<void>[] = [];
  for (const [i, request] of requests.entries()) {
    if (i > 0) await nextTurn();
    const ready = readySubmission(ctx, request);
    if (ready.kind !== "Ready") {
      results.set(request.token, ready);
      continue;
    }
    started.push(
      startSubmission(ctx, request, ready).then((result) => {
        results.set(request.token, result);
      }),
    );
  }
  await Promise.all(started);
  return results;
}
