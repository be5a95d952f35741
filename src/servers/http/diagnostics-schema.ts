/**
 * The schemas of `/healthz` and `/v1/diagnostics`: what the daemon says about itself, its
 * backend, its reconciler and its spool.
 */
import * as v from "valibot";
import {
  d,
  integer,
  nullableInteger,
  nullableText,
  nullableTime,
  text,
  time,
} from "./schema-fields.ts";
import { DegradedSchema } from "./view-schemas.ts";

export const HealthSchema = v.strictObject({
  status: v.pipe(
    v.picklist(["ok", "degraded"]),
    d(
      "ok: the daemon runs. degraded: it runs but refuses new work, the state dir or the spool being below its low-water mark of free space (see problems).",
    ),
  ),
  problems: v.optional(
    v.pipe(v.array(v.string()), d("What makes it degraded, one sentence each.")),
  ),
});

const callCounts = (what: string) => v.pipe(v.record(v.string(), v.number()), d(what));

export const DiagnosticsSchema = v.strictObject({
  version: text("The daemon's version."),
  backend: v.pipe(
    v.strictObject({
      name: text("The backend's name (local, or a cluster backend)."),
      healthy: v.pipe(v.boolean(), d("Whether the backend answered its health check in time.")),
      message: text("What the backend said about itself."),
      calls: callCounts("Calls the backend made to its scheduler, by kind."),
      callsPerSecond: v.pipe(
        v.number(),
        d("Port calls per second made by the reconciler, over the last minute."),
      ),
      orphans: v.optional(
        v.pipe(
          v.nullable(
            v.strictObject({
              policy: v.pipe(v.picklist(["report", "cancel"]), d("What is done with orphans.")),
              lastSweepAt: nullableTime("When the last sweep got an answer; null before it."),
              error: nullableText("Why the last sweep had no answer; null when it had one."),
              jobs: v.pipe(
                v.array(
                  v.strictObject({
                    handle: text("The backend's id of the job."),
                    token: text("The submission token the job carries."),
                    state: text("The job's state at the backend."),
                    action: v.pipe(
                      v.picklist(["REPORTED", "CANCEL_REQUESTED", "CANCEL_FAILED"]),
                      d("What this daemon did about it."),
                    ),
                  }),
                ),
                d("Jobs carrying this daemon's identity with no allocation row."),
              ),
            }),
          ),
          d(
            "Only from a backend that sweeps for orphans (null before its first sweep): jobs of this daemon it has no row for, never adopted.",
          ),
        ),
      ),
      profileChecks: v.optional(
        v.pipe(
          v.array(
            v.strictObject({
              profile: text("The profile."),
              outcome: v.pipe(
                v.picklist(["POSSIBLE", "IMPOSSIBLE", "UNANSWERED"]),
                d(
                  "IMPOSSIBLE: the scheduler refuses any job of this profile (a placement it does not have); UNANSWERED: it could not be asked.",
                ),
              ),
              detail: text("The scheduler's own words (for administrators only)."),
              checkedAt: time("When it answered."),
            }),
          ),
          d(
            "Only from a backend that asks its scheduler about each profile (at start, then every 10 minutes): a dry run that queues nothing.",
          ),
        ),
      ),
    }),
    d("The backend's own report, bounded in time."),
  ),
  isolation: v.pipe(
    v.strictObject({
      launchesSandboxed: v.pipe(
        v.boolean(),
        d("New jobs start inside the verified per-allocation sandbox."),
      ),
      unsandboxedBatchAllowed: v.pipe(
        v.boolean(),
        d(
          "Started with --allow-unsandboxed-batch: BATCH may run as the daemon's uid, unsandboxed.",
        ),
      ),
      batchRefusal: nullableText(
        "Why BATCH submissions are refused now (ISOLATION_UNAVAILABLE); null when they are placed.",
      ),
      jobIdentity: text(
        "Who jobs run as: a leased uid range, one named account, or the daemon's uid.",
      ),
    }),
    d("How jobs are isolated right now."),
  ),
  profiles: v.pipe(
    v.array(
      v.strictObject({
        name: text("The profile."),
        consecutiveRejections: integer("Submissions the backend refused in a row."),
        degraded: v.pipe(v.nullable(DegradedSchema), d("Set while its breaker is open.")),
      }),
    ),
    d("Profiles the backend refused since their last accepted submission."),
  ),
  reconciler: v.pipe(
    v.strictObject({
      lastTick: v.pipe(
        v.nullable(
          v.strictObject({
            startedAt: time("When the tick started."),
            durationMs: v.pipe(v.number(), d("How long it took.")),
            backendCalls: callCounts("Calls the tick made to the backend, by port operation."),
            backendCallsTotal: integer("Their sum."),
            backendUnavailable: v.pipe(v.boolean(), d("A backend call failed during the tick.")),
            error: nullableText("Set when a store failure aborted the tick."),
          }),
        ),
        d("The last finished tick; null before the first."),
      ),
    }),
    d("The reconciler's figures."),
  ),
  spool: v.optional(
    v.pipe(
      v.strictObject({
        path: text("The spool: where jobs' workspaces and logs are written."),
        healthy: v.pipe(
          v.boolean(),
          d("False below the low-water mark, or when its free space cannot be read."),
        ),
        freeBytes: nullableInteger("Bytes an unprivileged writer may still use; null if unread."),
        totalBytes: nullableInteger("The filesystem's size in bytes; null if unread."),
        lowWaterBytes: nullableInteger(
          "Below this much free space new submissions get 503 SPOOL_FULL; null if unread.",
        ),
        message: nullableText("Why it is not healthy; null when it is."),
      }),
      d("The spool's free space against its low-water mark."),
    ),
  ),
  stateDir: v.optional(
    v.pipe(
      v.strictObject({
        path: text("The private state dir: the store, keys, the backends' job records."),
        healthy: v.pipe(
          v.boolean(),
          d("False below the low-water mark, or when its free space cannot be read."),
        ),
        freeBytes: nullableInteger("Bytes still free in its filesystem; null if unread."),
        totalBytes: nullableInteger("The filesystem's size in bytes; null if unread."),
        lowWaterBytes: nullableInteger(
          "Below this much free space new submissions get 503 STATE_DIR_FULL; null if unread.",
        ),
        message: nullableText("Why it is not healthy; null when it is."),
      }),
      d("The state dir's free space against its low-water mark."),
    ),
  ),
});
