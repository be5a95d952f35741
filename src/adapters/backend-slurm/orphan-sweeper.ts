/**
 * Jobs nobody owns: a store restored from last night's backup, or a lost state dir, leaves
 * jobs on the cluster that carry our token but have no allocation row. Nothing else finds
 * them, and they hold nodes until their time limit.
 *
 * One squeue of the live jobs per sweep, whatever their number, of the accounts the observe
 * path lists (the broker's listUid): the service account's, or every account's once a profile
 * runs jobs as their owners (`run_as = "owner"`), whose jobs belong to the scientists and
 * were never seen by a sweep of the service account alone. A job is ours only when its
 * comment is `TOKEN.OWNER` with THIS daemon's owner id (one per state dir), so a second
 * daemon on the same cluster and account, and a scientist's own jobs in the every-account
 * listing, are never touched. Only a job's own account (or root) can set its comment, so a
 * comment forged to look like ours can at worst get its forger's own job cancelled. A job with
 * no row is reported (policy `report`, the default) or cancelled (`cancel`), never adopted:
 * adopting would attach work to a workload the restored store no longer describes.
 *
 * The token check reads the store AFTER the listing: a job submitted between the two has
 * its row already (the token is durable before sbatch runs), so it is never taken for an
 * orphan.
 */
import { randomBytes } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { isSubmissionToken, type SubmissionToken } from "../../core/models.ts";
import type { OrphanDiagnostics, OrphanPolicy } from "../../core/ports/allocation-backend.ts";
import { backgroundLoop } from "../../lib/background-loop.ts";
import type { Clock, Timers } from "../../lib/clock.ts";
import { errorCode } from "../../lib/durable-fs.ts";
import type { Log } from "../../lib/log.ts";
import type { SlurmBroker } from "./broker.ts";

export type OrphanReport = OrphanDiagnostics;

export const OWNER_ID_PATTERN = /^[a-z0-9]{12}$/;
const OWNER_FILE = "owner-id";
const COMMENT = /^(o4s-[a-z0-9]{26})\.([a-z0-9]{12})$/;

/** The comment a job carries: its token, and whose it is. */
export function jobComment(token: string, ownerId: string | undefined): string {
  return ownerId === undefined ? token : `${token}.${ownerId}`;
}

/** The token of a job this owner submitted, or null for anyone else's job. */
export function ownedToken(comment: string, ownerId: string): SubmissionToken | null {
  const match = COMMENT.exec(comment);
  if (!match || match[2] !== ownerId) return null;
  const token = match[1] ?? "";
  return isSubmissionToken(token) ? token : null;
}

/**
 * The owner id of a state dir: made once, then read back. Created exclusively (`wx`), so
 * two daemons started at once on one dir agree on the id the file ends up holding.
 */
export function loadOwnerId(dir: string): string {
  const path = join(dir, OWNER_FILE);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  try {
    const alphabet = "0123456789abcdefghijklmnopqrstuvwxyz";
    const id = [...randomBytes(12)].map((b) => alphabet[b % 36]).join("");
    writeFileSync(path, `${id}\n`, { flag: "wx", mode: 0o600 });
  } catch (error) {
    if (errorCode(error) !== "EEXIST") throw error;
  }
  const id = readFileSync(path, "utf8").trim();
  if (!OWNER_ID_PATTERN.test(id)) throw new Error(`${path} does not hold an owner id`);
  return id;
}

export interface OrphanSweeperOptions {
  readonly broker: SlurmBroker;
  readonly ownerId: string;
  readonly policy: OrphanPolicy;
  readonly intervalMs: number;
  /** The tokens among these that have an allocation row (one store query). */
  readonly knownTokens: (tokens: readonly SubmissionToken[]) => ReadonlySet<string>;
  readonly clock: Clock;
  readonly log: Log;
  /** The sweep's period runs on these (the plugin's background timers; tests: a timeline). */
  readonly timers: Timers;
}

export interface OrphanSweeper {
  sweepOnce(): Promise<OrphanReport>;
  report(): OrphanReport | null;
  /** Sweeps now and then every intervalMs until stop(). */
  start(): void;
  stop(): Promise<void>;
}

export function createOrphanSweeper(options: OrphanSweeperOptions): OrphanSweeper {
  const { broker, ownerId, policy, clock, log } = options;
  let last: OrphanReport | null = null;

  async function sweepOnce(): Promise<OrphanReport> {
    const listed = await broker.listLiveJobs();
    if (listed.kind === "Failed") {
      last = {
        policy,
        lastSweepAt: last?.lastSweepAt ?? null,
        error: listed.error.message,
        jobs: last?.jobs ?? [],
      };
      return last;
    }
    const ours = listed.value.flatMap((row) => {
      const token = ownedToken(row.comment, ownerId);
      return token === null ? [] : [{ row, token }];
    });
    const known =
      ours.length === 0 ? new Set<string>() : options.knownTokens(ours.map((o) => o.token));
    const orphans = ours.filter((o) => !known.has(o.token));
    let action: "REPORTED" | "CANCEL_REQUESTED" | "CANCEL_FAILED" = "REPORTED";
    if (orphans.length > 0 && policy === "cancel") {
      const cancelled = await broker.cancelJobs(orphans.map((o) => o.row.jobId));
      action = cancelled.kind === "Answered" ? "CANCEL_REQUESTED" : "CANCEL_FAILED";
    }
    if (orphans.length > 0) {
      log.warn("jobs of this daemon with no allocation row", {
        policy,
        action,
        jobIds: orphans.map((o) => o.row.jobId),
      });
    }
    last = {
      policy,
      lastSweepAt: clock.now(),
      error: null,
      jobs: orphans.map((o) => ({
        handle: o.row.jobId,
        token: o.token,
        state: o.row.state,
        action,
      })),
    };
    return last;
  }

  const loop = backgroundLoop({
    timers: options.timers,
    run: async () => {
      await sweepOnce();
      return options.intervalMs;
    },
    onError: (error) => log.error("orphan sweep failed", { error: String(error) }),
    afterErrorMs: options.intervalMs,
  });

  return {
    sweepOnce,
    report: () => last,
    start: () => loop.start(),
    stop: () => loop.stop(),
  };
}
