/**
 * The daemon's working parts, built in one place: the store's ports, the backend (by name,
 * guarded by live allocations), the sessions engine, the attempt preparers and the
 * reconciler. The daemon starts and stops what this returns; it binds no adapter and builds
 * no part itself.
 */

import { join } from "node:path";
import { systemAccounts } from "../../../adapters/accounts-nss/getent-accounts.ts";
import { ownerIdentities } from "../../../adapters/isolation-bwrap/owner-identities.ts";
import {
  type IdentityChoice,
  type IdentityDatabase,
  ownerModeRefusal,
  systemIdentityDatabase,
} from "../../../adapters/isolation-bwrap/run-as.ts";
import {
  fixedIdentities,
  leasedIdentities,
  namedIdsOf,
} from "../../../adapters/isolation-bwrap/uid-leases.ts";
import type { DaemonMetrics } from "../../../adapters/metrics/daemon-metrics.ts";
import { observeTransitions } from "../../../adapters/metrics/transition-observer.ts";
import { batchPreparer } from "../../../adapters/spool/batch-preparer.ts";
import { sessionsDisabledPreparer } from "../../../adapters/spool/session-preparer.ts";
import type { StoreDeps } from "../../../adapters/store-sqlite/deps.ts";
import {
  getPrincipal,
  isPrincipalUnixUser,
} from "../../../adapters/store-sqlite/ops/principals.ts";
import type { AccountDatabase, AccountLookup } from "../../../core/accounts.ts";
import { gatedBatchPreparer, gatedUnsandboxedBatch } from "../../../core/isolation/batch-gate.ts";
import { guardedByLiveAllocations } from "../../../core/isolation/live-guard.ts";
import { mountsAwaitVerdict } from "../../../core/isolation/mounts-await-verdict.ts";
import { type StateLayout, WORKLOADS_DIR } from "../../../core/layout.ts";
import type { ResourceProfile } from "../../../core/models.ts";
import type { AdmissionStore } from "../../../core/ports/admission-store.ts";
import type { AllocationBackend } from "../../../core/ports/allocation-backend.ts";
import { preparerByKind } from "../../../core/preparer-by-kind.ts";
import {
  createReconciler,
  type Reconciler,
  type ReconcilerOptions,
} from "../../../core/reconciler/create-reconciler.ts";
import type { JobIdentities } from "../../../core/sandbox.ts";
import {
  createEnvironmentEndings,
  type EnvironmentEndings,
  withEnvironmentEndings,
} from "../../../core/session/environment-endings.ts";
import { type Clock, systemTimers } from "../../../lib/clock.ts";
import type { FaultPoints } from "../../../lib/fault-point.ts";
import type { Log } from "../../../lib/log.ts";
import { forbiddenRoots, startupSourceProblem } from "../../../lib/mount-sources.ts";
import type { DaemonSettings } from "../config.ts";
import { binaryIdentity } from "./binary-identity.ts";
import type { BackgroundService } from "./context.ts";
import { createBackend } from "./create-backend.ts";
import { composeSessions, type SessionsComponent } from "./sessions.ts";
import { bindStores } from "./stores.ts";

export interface CoreConfig {
  readonly backendName: string;
  readonly layout: StateLayout;
  readonly store: StoreDeps;
  readonly faults: FaultPoints;
  readonly clusterConfigPath: string | null;
  readonly selfCommand: readonly string[];
  /** What the daemon's children inherit (context.ts); no setting is read from it. */
  readonly env: Readonly<Record<string, string | undefined>>;
  /** The daemon's settings, parsed once at start (config.ts). */
  readonly settings: DaemonSettings;
  /** Who jobs run as, as chosen at start (`serve --run-as`, `--uid-range`). */
  readonly identity: IdentityChoice;
  /** `serve --allow-unsandboxed-batch`: BATCH runs as the daemon's uid without a sandbox. */
  readonly allowUnsandboxedBatch?: boolean;
  readonly clock: Clock;
  readonly log: Log;
  /** Where the reconciler, the store observer and the sessions engine record figures. */
  readonly metrics: DaemonMetrics;
  readonly pacing?: {
    readonly minIntervalMs?: number;
    readonly maxIntervalMs?: number;
    readonly maxCommandsInFlight?: number;
  };
}

export interface Core {
  readonly backend: AllocationBackend;
  readonly reconciler: Reconciler;
  /** Null when sessions are off (no worker gateway). */
  readonly sessions: SessionsComponent | null;
  /** The backend's own background work (the orphan sweep, isolation verifiers). */
  readonly services: readonly BackgroundService[];
  /** What the API's admission writes through. */
  readonly admission: AdmissionStore;
  /** Who jobs run as, in words (diagnostics). */
  readonly jobIdentity: string;
  /** Who jobs run as: uploads into a workspace are given to the same identity. */
  readonly identities: JobIdentities;
  /** The site's accounts and uid floor a principal's unix user is checked against. */
  readonly accounts: { readonly lookup: AccountLookup; readonly minUid: number };
}

export type CoreResult =
  | { readonly kind: "Composed"; readonly core: Core }
  /** Something the admin must fix (exit 2); nothing built is left running. */
  | { readonly kind: "ConfigError"; readonly message: string };

export async function composeCore(config: CoreConfig): Promise<CoreResult> {
  const { layout, clock, log, faults } = config;
  const stores = bindStores(config.store);
  // Filled once the backend has read its profiles (below), before anything is submitted.
  const ownerProfiles = new Set<string>();
  // NSS (LDAP, SSSD too); a launch asks afresh, or a just-deleted account's uid still runs.
  const accounts = systemAccounts(clock);
  const launchAccounts = systemAccounts(clock, { cached: false });
  const identities = composeIdentities(config, ownerProfiles, launchAccounts);
  const created = await createBackend(config.backendName, {
    faults,
    layout,
    clusterConfigPath: config.clusterConfigPath,
    selfCommand: config.selfCommand,
    clock,
    log,
    env: config.env,
    settings: config.settings,
    identities,
    accounts: launchAccounts,
    knownTokens: stores.knownTokens,
    isolationVerdicts: stores.isolationVerdicts,
    binary: binaryIdentity(config.selfCommand),
  });
  if (created.kind === "ConfigError") {
    return { kind: "ConfigError", message: created.message };
  }
  for (const p of created.backend.profiles()) if (p.runAs === "owner") ownerProfiles.add(p.name);
  const refusal =
    ownerModeRefusal(ownerProfiles, config.identity) ??
    mountsRefusal(created.backend.profiles(), forbiddenRoots([layout.root, layout.spool]));
  if (refusal !== null) {
    await Promise.all((created.services ?? []).map((service) => service.stop()));
    return { kind: "ConfigError", message: refusal };
  }
  // A session's worker that finds its environment unusable on its node names the end.
  const environmentEndings = createEnvironmentEndings();
  const backend = daemonBackend(config, created.backend, {
    stores,
    identities,
    environmentEndings,
  });

  // Sessions (opt-in: the worker gateway only listens when OPENAI4S_WORKER_LISTEN says so).
  // Null means SESSION attempts are refused by the preparer, after admission already
  // refused them for lack of isolation.
  let sessions: SessionsComponent | null;
  try {
    sessions = await composeSessions({
      layout,
      stores,
      backend,
      clock,
      log,
      settings: config.settings,
      metrics: config.metrics,
      environmentEndings,
    });
  } catch (error) {
    // The backend's verifiers started when it was made; they must not outlive the refusal.
    await Promise.all((created.services ?? []).map((service) => service.stop()));
    return { kind: "ConfigError", message: `sessions: ${String(error)}` };
  }

  const reconciler = composeReconciler(config, { store: stores.reconciler, backend, sessions });
  sessions?.attachReconciler?.(reconciler);
  return {
    kind: "Composed",
    core: {
      backend,
      reconciler,
      sessions,
      services: created.services ?? [],
      admission: stores.admission,
      jobIdentity: identities.description,
      identities,
      // What `principal add` checks a unix user against: the site's accounts (NSS).
      accounts: { lookup: accounts, minUid: config.settings.minOwnerUid },
    },
  };
}

/**
 * The backend as the daemon uses it: an allocation whose session worker reported its
 * environment unusable ends naming what and where; SESSIONs wait while any live allocation
 * runs outside the verified sandbox; BATCH is refused while its jobs would run as the
 * daemon's own uid outside one.
 */
function daemonBackend(
  config: CoreConfig,
  created: AllocationBackend,
  parts: {
    readonly stores: ReturnType<typeof bindStores>;
    readonly identities: JobIdentities;
    readonly environmentEndings: EnvironmentEndings;
  },
): AllocationBackend {
  return gatedUnsandboxedBatch(
    guardedByLiveAllocations(
      withEnvironmentEndings(created, parts.environmentEndings),
      parts.stores.unsandboxedLive,
    ),
    {
      jobsKeepDaemonUid: !parts.identities.switchesUid,
      allowUnsandboxedBatch: config.allowUnsandboxedBatch === true,
    },
  );
}

/**
 * Who jobs run as: the admin's choice, except a principal's work under a profile that runs
 * as its owner (`ownerProfiles`, filled once the backend has read its profiles).
 */
function composeIdentities(
  config: CoreConfig,
  ownerProfiles: ReadonlySet<string>,
  accounts: AccountDatabase,
): JobIdentities {
  return ownerIdentities({
    base: jobIdentities(config.identity, config.layout),
    runsAsOwner: (profile) => ownerProfiles.has(profile),
    anyRunsAsOwner: () => ownerProfiles.size > 0,
    unixUserOf: (principal) => getPrincipal(config.store, principal)?.unixUser ?? null,
    isPrincipalAccount: (user) => isPrincipalUnixUser(config.store, user),
    accounts,
    minUid: config.settings.minOwnerUid,
  });
}

/**
 * The reconciler over the store's port, its transitions observed for the metrics, preparing
 * BATCH and (when sessions are on) SESSION attempts. Admission hands a POST's first attempt
 * to a lane before any view load has the workload; the observer learns it here to measure
 * that submit.
 */
function composeReconciler(
  config: CoreConfig,
  parts: {
    readonly store: ReconcilerOptions["store"];
    readonly backend: AllocationBackend;
    readonly sessions: SessionsComponent | null;
  },
): Reconciler {
  const { clock, log, faults, metrics, layout } = config;
  const { backend, sessions } = parts;
  const preparer = mountsAwaitVerdict(
    preparerByKind({
      BATCH: gatedBatchPreparer(batchPreparer({ layout }), backend),
      SESSION:
        sessions?.preparer ??
        sessionsDisabledPreparer("sessions are not enabled on this daemon (no worker gateway)"),
    }),
    backend,
  );
  const observer = observeTransitions(parts.store, metrics);
  const running = createReconciler({
    timers: systemTimers,
    store: observer.store,
    onTickEnded: (report) => metrics.tickDuration.observe(report.durationMs / 1000),
    backend,
    profileBreaker: config.settings.profileBreaker,
    preparer,
    clock,
    log,
    faultPoint: (point) => faults.hit(point),
    ...(sessions?.barrierHooks ? { barrierHooks: sessions.barrierHooks } : {}),
    ...config.pacing,
  });
  return {
    ...running,
    admitted(workload, attempt) {
      observer.admitted(workload);
      running.admitted(workload, attempt);
    },
  };
}

/**
 * Every declared mount's source, checked before anything runs (a `{user}` source: the
 * directory above `{user}`): a typo, or a source inside the state dir or the spool, stops the
 * start naming the profile, rather than failing every job of the profile later.
 */
function mountsRefusal(
  profiles: readonly ResourceProfile[],
  forbidden: readonly string[],
): string | null {
  for (const p of profiles) {
    for (const m of p.mounts ?? []) {
      const problem = startupSourceProblem(m, forbidden);
      if (problem !== null)
        return `profile ${JSON.stringify(p.name)} mount ${m.target}: ${problem}`;
    }
  }
  return null;
}

/** The admin's choice made into the identities launches claim (leases live in the spool). */
function jobIdentities(
  choice: IdentityChoice,
  layout: StateLayout,
  identityDb: IdentityDatabase = systemIdentityDatabase(),
): JobIdentities {
  switch (choice.kind) {
    case "DaemonUid":
      return fixedIdentities(null);
    case "Fixed":
      return fixedIdentities(choice.runAs);
    case "Leased":
      return leasedIdentities({
        range: choice.range,
        workloadsDir: join(layout.spool, WORKLOADS_DIR),
        namedIds: namedIdsOf(identityDb.passwd, identityDb.group),
      });
    default: {
      const never: never = choice;
      throw new Error(`unhandled identity choice ${JSON.stringify(never)}`);
    }
  }
}
