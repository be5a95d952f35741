/**
 * A cancel of one local job: the request made durable first, then an unclaimed job withdrawn
 * or a running one's supervisor signalled (it stops the job's group and records the end); a
 * job whose supervisor is gone is stopped here.
 */
import type { CancelResult, ObservationTarget } from "../../core/ports/allocation-backend.ts";
import { errorCode } from "../../lib/durable-fs.ts";
import { readJobSnapshot } from "./job-state.ts";
import type { LocalContext } from "./local-context.ts";
import { isAlive } from "./proc.ts";
import { requestCancel, withdraw } from "./record-store.ts";
import { jobDir } from "./records.ts";
import { stopOrphan } from "./supervisors.ts";

export function cancelOne(ctx: LocalContext, target: ObservationTarget): CancelResult {
  const dir = jobDir(ctx.backendDir, target.token);
  let snapshot = readJobSnapshot(dir, ctx.bootId);
  if (snapshot.kind === "Absent") return { kind: "Requested" };
  // Durable first: if the daemon dies before the signal lands, the supervisor (or the
  // next look at an unclaimed record) still finds the request.
  requestCancel(ctx, dir, snapshot);
  if (snapshot.kind === "Unclaimed") {
    if (withdraw(ctx, dir, "CANCELLED", "cancelled before it started"))
      return { kind: "Requested" };
    snapshot = readJobSnapshot(dir, ctx.bootId);
  }
  if (snapshot.kind !== "Claimed" || snapshot.exit !== null) return { kind: "Requested" };
  if (isAlive(snapshot.claim, ctx.bootId)) {
    ctx.count("signal");
    try {
      process.kill(snapshot.claim.pid, "SIGTERM");
    } catch (error) {
      if (errorCode(error) !== "ESRCH") throw error;
    }
    return { kind: "Requested" };
  }
  stopOrphan(ctx, snapshot);
  return { kind: "Requested" };
}
