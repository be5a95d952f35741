/**
 * The scheduler's dry run of every profile, in the daemon: at start and then every few
 * minutes, one `sbatch --test-only` per profile (what `check-config --preflight` does by
 * hand). Before, a profile pointing at a partition the cluster does not have started
 * without a word, and every submission to it, the admin's too, ended SUBMIT_REJECTED
 * "invalid placement specified: [hidden]" with nothing at the default log level. Now the
 * refusal is logged at warn in the scheduler's own words when it is first seen (and once
 * when it clears), and diagnostics show each profile's last answer to the admin;
 * GET /v1/profiles shows a refused profile as degraded, in these words to the admin and with
 * the site's names hidden to principals.
 *
 * The daemon reads cluster.toml once, at start (there is no reload): a changed file takes a
 * restart, which checks every profile again before the first interval.
 */

import { decorateBackend } from "../../core/decorate-backend.ts";
import type { AllocationBackend, ProfileCheck } from "../../core/ports/allocation-backend.ts";
import { backgroundLoop } from "../../lib/background-loop.ts";
import type { Clock, Timers } from "../../lib/clock.ts";
import type { Log } from "../../lib/log.ts";
import type { PlacementCatalog } from "./backend-options.ts";
import { preflightProfiles, type SbatchTestRun } from "./profiles-preflight.ts";

export interface ProfileChecks {
  start(): void;
  stop(): Promise<void>;
  /** The last answer for each profile (none before the first run). */
  report(): readonly ProfileCheck[];
  /**
   * The scheduler accepted a job of this profile: a refusal its last dry run gave is out of
   * date (the admin fixed the partition), so the profile is no longer shown degraded for up
   * to one interval after its jobs run again.
   */
  accepted(profile: string): void;
}

export interface ProfileChecksOptions {
  readonly catalog: PlacementCatalog;
  readonly run: SbatchTestRun;
  readonly clock: Clock;
  readonly timers: Timers;
  readonly log: Log;
  /** Between runs; a partition an admin creates later is seen within it. */
  readonly intervalMs: number;
  /** The scheduler's words as a principal may read them (public-messages.ts). */
  readonly publicForm: (detail: string) => string;
}

export function createProfileChecks(options: ProfileChecksOptions): ProfileChecks {
  const { catalog, log } = options;
  let last = new Map<string, ProfileCheck>();

  function note(check: ProfileCheck): void {
    const before = last.get(check.profile)?.outcome;
    if (check.outcome === "IMPOSSIBLE" && before !== "IMPOSSIBLE") {
      log.warn("the scheduler refuses a profile: no job of it can start", {
        profile: check.profile,
        said: check.detail,
      });
    } else if (check.outcome === "POSSIBLE" && before === "IMPOSSIBLE") {
      log.info("the scheduler accepts a profile again", { profile: check.profile });
    }
  }

  async function runOnce(): Promise<number> {
    const profiles = catalog.profiles().flatMap((p) => {
      const placement = catalog.placement(p.name);
      return placement === null ? [] : [{ name: p.name, placement }];
    });
    const verdicts = await preflightProfiles(profiles, options.run);
    const at = options.clock.now();
    const next = new Map<string, ProfileCheck>();
    for (const v of verdicts) {
      const before = last.get(v.profile);
      const check: ProfileCheck = {
        profile: v.profile,
        outcome: v.outcome,
        detail: v.detail,
        publicDetail: options.publicForm(v.detail),
        checkedAt: at,
        // Since when it has said so: "degraded since" in GET /v1/profiles.
        since: before?.outcome === v.outcome ? before.since : at,
      };
      note(check);
      next.set(v.profile, check);
    }
    last = next;
    return options.intervalMs;
  }

  const loop = backgroundLoop({
    timers: options.timers,
    run: runOnce,
    onError: (error) => log.error("profile check failed", { error: String(error) }),
    afterErrorMs: options.intervalMs,
  });
  return {
    start: () => loop.start(),
    stop: () => loop.stop(),
    report: () => [...last.values()],
    accepted(profile) {
      const before = last.get(profile);
      if (before?.outcome !== "IMPOSSIBLE") return;
      const at = options.clock.now();
      const detail = "the scheduler accepted a job of this profile since its last dry run";
      const check: ProfileCheck = {
        ...before,
        outcome: "POSSIBLE",
        detail,
        publicDetail: detail,
        checkedAt: at,
        since: at,
      };
      note(check);
      last = new Map(last).set(profile, check);
    },
  };
}

/** The backend, telling `checks` of each profile whose submission the scheduler accepted. */
export function withAcceptedSubmissions<B extends AllocationBackend>(
  backend: B,
  checks: Pick<ProfileChecks, "accepted">,
): B {
  return decorateBackend(backend, {
    async submit(requests) {
      const results = await backend.submit(requests);
      for (const r of requests) {
        if (results.get(r.token)?.kind === "Created") checks.accepted(r.profile);
      }
      return results;
    },
  });
}
