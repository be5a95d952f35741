/**
 * What the daemon builds its backend from (create-backend.ts turns it into the chosen
 * plugin's context) and the isolation policy (session-isolation.ts) reads.
 */

import type { AccountDatabase } from "../../../core/accounts.ts";
import type { BackgroundVerifier } from "../../../core/isolation/background-verifier.ts";
import type { StateLayout } from "../../../core/layout.ts";
import type { SubmissionToken } from "../../../core/models.ts";
import type { BackgroundService } from "../../../core/ports/backend-plugin.ts";
import type { IsolationVerdictStore } from "../../../core/ports/isolation-verdict-store.ts";
import type { JobIdentities } from "../../../core/sandbox.ts";
import type { Clock, Timers } from "../../../lib/clock.ts";
import type { FaultPoints } from "../../../lib/fault-point.ts";
import type { Log } from "../../../lib/log.ts";
import type { DaemonSettings } from "../config.ts";

/** Everything a backend may be built from; the daemon fills it once at start. */
export interface BackendContext {
  readonly layout: StateLayout;
  /** `--cluster-config FILE`, resolved to an absolute path; null when not given. */
  readonly clusterConfigPath: string | null;
  /** How to re-invoke this binary (src/lib/self-command.ts). */
  readonly selfCommand: readonly string[];
  readonly clock: Clock;
  readonly log: Log;
  /**
   * The daemon's environment as it is passed on to what the daemon starts (PATH, HOME and
   * LANG for local jobs, the cluster client's own variables for its commands). Settings
   * are not read from it: they are `settings`, parsed once at start.
   */
  readonly env: Readonly<Record<string, string | undefined>>;
  /** Parsed once at start (config.ts). */
  readonly settings: DaemonSettings;
  /** Crash-test fault points, read from the environment once by the daemon. */
  readonly faults: FaultPoints;
  /**
   * Who each job runs as: a leased uid per workload or one account (`serve --run-as`) when
   * the daemon is root; its own uid otherwise (in a user namespace when sandboxed).
   */
  readonly identities: JobIdentities;
  /** The site's accounts (NSS): who a uid is, for the scheduler to own a job as it. */
  readonly accounts?: AccountDatabase;
  /** When background isolation probes run (tests fire them by hand); default: timers. */
  readonly isolationSchedule?: Timers;
  /** The tokens among these that have an allocation row (the orphan sweep's one store query). */
  readonly knownTokens?: (tokens: readonly SubmissionToken[]) => ReadonlySet<string>;
  /** Where a cluster's Verified isolation verdict is kept across restarts; absent: nowhere. */
  readonly isolationVerdicts?: IsolationVerdictStore;
  /** This daemon binary (version and executable identity), stored with such a verdict. */
  readonly binary?: string;
}

/**
 * An isolation verifier as a service: stopped with the daemon, and waited for, so a probe
 * still in flight neither keeps its timer nor writes into a spool being removed.
 */
export function verifierService(verifier: BackgroundVerifier): BackgroundService {
  return {
    start() {
      // Started when it was made: the first verdict is needed before the daemon listens.
    },
    async stop() {
      verifier.stop();
      await verifier.settled();
    },
  };
}

export type { BackendCreation, BackgroundService } from "../../../core/ports/backend-plugin.ts";
