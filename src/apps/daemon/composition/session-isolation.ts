/**
 * Session isolation policy, for the local backend and for a cluster backend.
 *
 * Sessions need the worker gateway (OPENAI4S_WORKER_LISTEN) and a VERIFIED per-allocation
 * sandbox. Whenever the sandbox verifies, it wraps EVERY local launch, BATCH included and
 * whether or not the gateway is on: a BATCH job outside it could read a session's credential
 * and workspace, and the daemon's own files. When bubblewrap does not verify, BATCH still
 * runs (it never requires the capability), never as root (RunAs), and SESSION is refused.
 * Either way the backend answers the isolation question with the precise reason, so
 * admission refuses with ISOLATION_UNAVAILABLE and a message saying what to fix. The
 * decision is taken once, at start: turning the sandbox on for BATCH is a restart.
 */

import { realpathSync } from "node:fs";
import { dirname, isAbsolute, join } from "node:path";
import { verifyThroughBackend } from "../../../adapters/isolation-bwrap/backend-probe.ts";
import { createBubblewrapSandbox } from "../../../adapters/isolation-bwrap/bubblewrap.ts";
import { plainWrapper } from "../../../adapters/isolation-bwrap/launch-argv.ts";
import {
  locateInStateDir,
  sandboxedBackend,
  wrappedBackend,
} from "../../../adapters/isolation-bwrap/through-backend.ts";
import { createBackgroundVerifier } from "../../../core/isolation/background-verifier.ts";
import {
  switchingToSandbox,
  verifiedInBackground,
  withoutSessionIsolation,
} from "../../../core/isolation/decorators.ts";
import {
  judgeRememberedVerdict,
  REMEMBERED_VERDICT_TTL_MS,
} from "../../../core/isolation/remembered-verdict.ts";
import type {
  AllocationBackend,
  IsolationVerdict,
} from "../../../core/ports/allocation-backend.ts";
import {
  type ClusterJobEnv,
  type IsolatedBackend,
  PROBE_JOB_TIME_LIMIT_SECONDS,
  PROBE_PROFILE,
  type SessionIsolationKit,
} from "../../../core/ports/backend-plugin.ts";
import { WORKER_LISTEN_ENV } from "../../../core/ports/worker-gateway.ts";
import type { Sandbox } from "../../../core/sandbox.ts";
import { type BackendContext, type BackgroundService, verifierService } from "./context.ts";

type LocalSessionIsolation =
  /** A verified sandbox and the gateway on: sessions and every launch sandboxed. */
  | { readonly kind: "Sessions"; readonly sandbox: Sandbox }
  /** A verified sandbox for every launch, but no sessions (why in `message`). */
  | { readonly kind: "SandboxOnly"; readonly sandbox: Sandbox; readonly message: string }
  | { readonly kind: "Unavailable"; readonly message: string };

/**
 * The sandbox is verified whether or not sessions are on: a plain BATCH job outside it ran
 * with the daemon's private dir and every other workspace reachable (issue 8). BATCH never
 * requires it: without bubblewrap, jobs still run, unsandboxed.
 */
async function localSessionIsolation(
  context: BackendContext,
  readOnlyExtra: readonly string[],
): Promise<LocalSessionIsolation> {
  const sandbox = bubblewrapFor(context, readOnlyExtra);
  const verdict = await sandbox.verify();
  const gatewayOn = context.settings.workerListen !== null;
  switch (verdict.kind) {
    case "Verified":
      return gatewayOn
        ? { kind: "Sessions", sandbox }
        : { kind: "SandboxOnly", sandbox, message: GATEWAY_OFF_MESSAGE };
    case "Unverified":
      context.log.warn("no verified sandbox: jobs run unsandboxed", { detail: verdict.message });
      return {
        kind: "Unavailable",
        message: gatewayOn
          ? `sessions need a verified per-allocation sandbox: ${verdict.message}`
          : GATEWAY_OFF_MESSAGE,
      };
    default: {
      const never: never = verdict;
      throw new Error(`unhandled isolation verdict ${JSON.stringify(never)}`);
    }
  }
}

/**
 * The policy as every backend's plugin receives it: a backend whose jobs run on this machine
 * is built with the sandbox verified here (or without one, SESSION refused with the reason);
 * one whose jobs run on nodes is wrapped and verified there.
 */
export function sessionIsolationKit(
  context: BackendContext,
  readOnlyExtra: readonly string[],
): SessionIsolationKit {
  return {
    plainLaunch: plainWrapper(context.identities),
    async onThisMachine(build): Promise<IsolatedBackend> {
      const isolation = await localSessionIsolation(context, readOnlyExtra);
      switch (isolation.kind) {
        case "Sessions": {
          const verified = verifiedInBackground({
            backend: build(isolation.sandbox),
            sandbox: isolation.sandbox,
            log: context.log,
            intervalMs: LOCAL_ISOLATION_INTERVAL_MS,
          });
          return { backend: verified.backend, services: [verifierService(verified.verifier)] };
        }
        case "SandboxOnly":
          // BATCH still runs in the sandbox: the private dir and other workloads stay hidden.
          return {
            backend: withoutSessionIsolation(build(isolation.sandbox), isolation.message),
            services: [],
          };
        case "Unavailable":
          return { backend: withoutSessionIsolation(build(null), isolation.message), services: [] };
        default: {
          const never: never = isolation;
          throw new Error(`unhandled isolation ${JSON.stringify(never)}`);
        }
      }
    },
    onNodes: (backend, probe, jobEnv) =>
      withClusterSessionIsolation(context, backend, probe, jobEnv, readOnlyExtra),
  };
}

/** How often the local sandbox is re-verified, in the background. */
export const LOCAL_ISOLATION_INTERVAL_MS = 60 * 1000;

const GATEWAY_OFF_MESSAGE = `sessions are not enabled on this daemon: the worker gateway is off (set ${WORKER_LISTEN_ENV}=HOST:PORT)`;

/**
 * The sandbox every backend's launches run in, masking the state dir. `readOnlyExtra`: the
 * admin's extra read-only directories (sandbox-read-only.ts), checked at start.
 */
function bubblewrapFor(context: BackendContext, readOnlyExtra: readonly string[]): Sandbox {
  const { bwrapPath } = context.settings;
  return createBubblewrapSandbox({
    ...(bwrapPath !== null ? { bwrapPath } : {}),
    runAs: context.identities.probe,
    identities: context.identities,
    log: context.log,
    hostEnv: context.env,
    // The private dir holds the database, the signing key and the admin token; the spool
    // every other workload's files. Only the launch's own directories are bound back.
    maskedRoots: [context.layout.root, context.layout.spool],
    // The worker is this program: its binary's directory, and from source (`bun src/main.ts`)
    // the project as well; and the admin's worker command when it replaces it (a wrapper in
    // front of the binary, as tests use). Both are the admin's choice, never a job's.
    readOnlyExtra: [
      ...selfDirectories(context.selfCommand),
      ...selfDirectories(workerCommandOf(context)),
      ...readOnlyExtra,
    ],
  });
}

/** The worker command the session engine will launch (its own errors are reported there). */
function workerCommandOf(context: BackendContext): readonly string[] {
  return context.settings.sessions.workerCommand;
}

/** What the worker needs bound read-only to start: its program and, from source, the project. */
export function selfDirectories(selfCommand: readonly string[]): readonly string[] {
  const [program, entry] = selfCommand;
  const dirs: string[] = [];
  if (program !== undefined && isAbsolute(program)) {
    dirs.push(dirname(program));
    try {
      dirs.push(dirname(realpathSync(program)));
    } catch {
      // A binary that vanished: the launch fails visibly, nothing to bind.
    }
  }
  if (entry !== undefined && isAbsolute(entry)) {
    const project = dirname(dirname(entry));
    dirs.push(project);
    // A checkout whose node_modules is a link to an install elsewhere (a worktree sharing
    // one install): without its target the worker died on "Cannot find package".
    try {
      const modules = realpathSync(join(project, "node_modules"));
      if (!modules.startsWith(`${project}/`)) dirs.push(modules);
    } catch {
      // No node_modules: a compiled binary's project, nothing more to bind.
    }
  }
  return [...new Set(dirs)];
}

/** After a Verified verdict on the nodes, the next background probe in this long. */
const CLUSTER_ISOLATION_TTL_MS = 10 * 60 * 1000;
/**
 * After an Unverified or inconclusive probe, the next one in this long. Most Unverified
 * verdicts at start are an outage (controller down, its config mid-edit), not a node
 * without bwrap: kept for the daemon's lifetime, they switched sessions off until someone
 * restarted it.
 */
export const CLUSTER_ISOLATION_RETRY_MS = 60 * 1000;

/**
 * The Verified verdict an earlier run of this binary stored, when it still counts
 * (remembered-verdict.ts), else null: the first probe decides, as without a store.
 */
function rememberedVerdict(context: BackendContext, backendName: string): IsolationVerdict | null {
  const store = context.isolationVerdicts;
  if (store === undefined || context.binary === undefined) return null;
  const judged = judgeRememberedVerdict(store.load(backendName), {
    nowMs: context.clock.now(),
    binary: context.binary,
    ttlMs: REMEMBERED_VERDICT_TTL_MS,
  });
  if (judged.kind === "Unusable") {
    context.log.info("no remembered isolation verdict to start from; probing", {
      detail: judged.message,
    });
    return null;
  }
  context.log.info("session isolation remembered from an earlier run; probing again", {
    mechanism: judged.verdict.mechanism,
  });
  return judged.verdict;
}

/** Keeps a probe's Verified verdict for the next start; an Unverified one forgets it. */
function rememberVerdict(
  context: BackendContext,
  backendName: string,
  verdict: IsolationVerdict,
): void {
  const store = context.isolationVerdicts;
  if (store === undefined || context.binary === undefined) return;
  try {
    if (verdict.kind === "Unverified") {
      store.forget(backendName);
      return;
    }
    store.save({
      backend: backendName,
      mechanism: verdict.mechanism,
      verifiedAt: context.clock.now(),
      binary: context.binary,
      nodes: verdict.nodes ?? [],
    });
  } catch (error) {
    // Only a restart's head start is lost: the running daemon keeps the verdict it has.
    context.log.warn("could not store the isolation verdict", { error: String(error) });
  }
}

/**
 * A cluster backend with sessions: the same policy as the local one, except that the sandbox
 * is verified ON THE NODES, by a probe allocation submitted through the backend itself (a
 * check on the daemon's host says nothing about a node without bwrap), and it is put on the
 * launch line by wrapping the backend (isolation/through-backend.ts), steps included. The
 * probe lays its two sibling allocations out in the spool, which the nodes share.
 *
 * Verification runs in the background (background-verifier.ts): at start, without holding
 * the start up, then every 10 minutes (every minute while unverified). Admission and attempt
 * preparation read the last verdict and never wait for a probe. A Verified verdict is kept
 * in the store; a restart of the same binary within its time to live starts from it (and
 * probes at once), so sessions are accepted while the new probe still waits in the queue.
 */
async function withClusterSessionIsolation(
  context: BackendContext,
  backend: AllocationBackend,
  /** The backend the probe is submitted through: `PROBE_PROFILE` is its smallest placement
   * where sessions land (the given profile's), and it owns no allocations. */
  probeBackend: (sessionProfile: string) => AllocationBackend,
  jobEnv: ClusterJobEnv,
  /** The admin's extra read-only sandbox directories (sandbox-read-only.ts). */
  readOnlyExtra: readonly string[],
): Promise<{
  readonly backend: AllocationBackend;
  readonly services: readonly BackgroundService[];
}> {
  const locate = locateInStateDir(context.layout);
  const job = {
    ...jobEnv,
    locate,
    spoolDir: context.layout.spool,
    mountForbidden: [context.layout.root, context.layout.spool],
    // A root daemon has the scheduler own each job as the uid it runs as, when that uid has
    // an account (a leased uid the site gave one): PMIx and accounting need the real owner.
    ...(process.getuid?.() === 0 && context.accounts !== undefined
      ? { accountOfUid: context.accounts.nameOfUid }
      : {}),
  };
  // Without a verified sandbox every launch still goes through this: never as root, and the
  // job's variables applied after the privilege drop, not handed to the batch script.
  const plain = wrappedBackend(backend, { ...job, wrapper: plainWrapper(context.identities) });
  const gatewayOn = context.settings.workerListen !== null;
  // BATCH is sandboxed whenever the nodes can be shown to sandbox, gateway or not: the probe
  // runs on a SESSION profile when there is one, else on the first profile.
  const profiles = backend.profiles();
  const profile = profiles.find((p) => p.kinds.includes("SESSION")) ?? profiles[0];
  if (profile === undefined) {
    return { backend: withoutSessionIsolation(plain, "this cluster has no profile"), services: [] };
  }
  const sessionsOff = !gatewayOn
    ? GATEWAY_OFF_MESSAGE
    : profile.kinds.includes("SESSION")
      ? null
      : "no profile of this cluster offers SESSION";
  const sandbox = bubblewrapFor(context, readOnlyExtra);
  const prober = probeBackend(profile.name);
  const probe = (signal: AbortSignal) =>
    verifyThroughBackend({
      signal,
      backend: prober,
      sandbox,
      probeRoot: join(context.layout.backendSpoolDir(backend.name), "isolation-probe"),
      profile: PROBE_PROFILE,
      jobTimeLimitSeconds: PROBE_JOB_TIME_LIMIT_SECONDS,
      clock: context.clock,
      log: context.log,
    });
  const remembered = rememberedVerdict(context, backend.name);
  // Launch lines are wrapped in the sandbox only once it has been seen working on the nodes
  // (by this run's probe, or by an earlier run of this binary, recently): wrapping BATCH jobs
  // in a bwrap the nodes may not have would fail every one of them.
  let sandboxing = remembered !== null;
  const verifier = createBackgroundVerifier({
    probe,
    log: context.log,
    ...(context.isolationSchedule ? { schedule: context.isolationSchedule } : {}),
    ...(remembered === null ? {} : { remembered }),
    verifiedIntervalMs: CLUSTER_ISOLATION_TTL_MS,
    retryIntervalMs: CLUSTER_ISOLATION_RETRY_MS,
    onVerdict(verdict) {
      rememberVerdict(context, backend.name, verdict);
      if (verdict.kind === "Verified" && !sandboxing) {
        context.log.info("session isolation verified on the nodes", {
          mechanism: verdict.mechanism,
        });
        sandboxing = true;
      } else if (verdict.kind === "Unverified") {
        context.log.warn("session isolation unavailable on the nodes; probed again later", {
          detail: verdict.message,
        });
      }
    },
  });
  verifier.start();
  const verify = async (): Promise<IsolationVerdict> => {
    if (sessionsOff !== null) return { kind: "Unverified", message: sessionsOff };
    const verdict = verifier.current();
    return verdict.kind === "Unverified"
      ? {
          kind: "Unverified",
          message: `sessions need a verified per-allocation sandbox on the nodes: ${verdict.message}`,
        }
      : verdict;
  };
  const sandboxed = sandboxedBackend(backend, { ...job, wrapper: sandbox, verify });
  return {
    backend: switchingToSandbox({
      backend,
      plain,
      sandboxed,
      sandboxing: () => sandboxing,
      pending: () => !verifier.concluded(),
      verify,
    }),
    services: [verifierService(verifier)],
  };
}
