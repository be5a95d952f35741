import { Hono } from "hono";
import type { DaemonMetrics } from "../../../adapters/metrics/daemon-metrics.ts";
import {
  countLiveWorkloads,
  countLiveWorkloadsByOwner,
} from "../../../adapters/store-sqlite/index.ts";
import {
  batchRefusal,
  type IsolationVerdict,
  launchesSandboxed,
  type OrphanDiagnostics,
  type ProfileCheck,
  sessionIsolationVerdict,
} from "../../../core/ports/allocation-backend.ts";
import { withDeadline } from "../../../lib/clock.ts";
import type { ApiDeps, ApiEnv, SpoolSpaceReport } from "../deps.ts";
import { breakerStates, degradedView } from "../profiles/profile-view.ts";
import { iso } from "../views.ts";
import { DEFAULT_DIAGNOSTICS_TIMEOUT_MS, readBackendHealth } from "./backend-health.ts";
import type { RequestCounter } from "./exposition.ts";
import { PROMETHEUS_CONTENT_TYPE, renderMetrics } from "./metrics.ts";
import { openApiDocument } from "./openapi.ts";

/**
 * The SESSION isolation verdict for /metrics, bounded like the diagnostics: a verifier that
 * probes on demand and hangs must not hang the scrape (it counts as unverified).
 */
async function isolationVerdict(deps: ApiDeps): Promise<IsolationVerdict> {
  const timeoutMs = deps.diagnosticsTimeoutMs ?? DEFAULT_DIAGNOSTICS_TIMEOUT_MS;
  return withDeadline(
    sessionIsolationVerdict(deps.backend),
    timeoutMs,
    (): IsolationVerdict => ({ kind: "Unverified", message: `no verdict within ${timeoutMs} ms` }),
  );
}

/** Orphans for operators: handles and tokens are theirs to act on; times as ISO strings. */
function orphansView(o: OrphanDiagnostics | null) {
  if (o === null) return null;
  return {
    policy: o.policy,
    lastSweepAt: o.lastSweepAt === null ? null : iso(o.lastSweepAt),
    error: o.error,
    jobs: o.jobs.map((j) => ({
      handle: j.handle,
      token: j.token,
      state: j.state,
      action: j.action,
    })),
  };
}

/**
 * How jobs are isolated right now: an operator must see an opt-out such as
 * `--allow-unsandboxed-batch` wherever they look, not only in the start-up log.
 */
function isolationView(deps: ApiDeps) {
  return {
    launchesSandboxed: launchesSandboxed(deps.backend),
    unsandboxedBatchAllowed: deps.isolation?.unsandboxedBatchAllowed ?? false,
    batchRefusal: batchRefusal(deps.backend),
    jobIdentity: deps.isolation?.jobIdentity ?? "unknown",
  };
}

function spoolView(r: SpoolSpaceReport) {
  return {
    path: r.path,
    healthy: !r.low,
    freeBytes: r.freeBytes,
    totalBytes: r.totalBytes,
    lowWaterBytes: r.lowWaterBytes,
    message: r.message,
  };
}

/** Every profile with its breaker, the breakers read once (not once per profile). */
function profileBreakerFigures(deps: ApiDeps, checks: readonly ProfileCheck[] | undefined) {
  const breakers = breakerStates(deps.reconciler);
  const refused = new Set(
    (checks ?? []).filter((c) => c.outcome === "IMPOSSIBLE").map((c) => c.profile),
  );
  return deps.backend.profiles().map((p) => {
    const state = breakers.get(p.name);
    return {
      name: p.name,
      degraded: state?.kind === "Open",
      consecutiveRejections: state?.consecutiveRejections ?? 0,
      schedulerRefuses: refused.has(p.name),
    };
  });
}

export function createSystemRoutes(
  deps: ApiDeps,
  requests: RequestCounter,
  metrics: DaemonMetrics,
) {
  const app = new Hono<ApiEnv>();
  const document = openApiDocument(deps.version);

  // Degraded, not down: the daemon answers and runs what it holds, but refuses new work
  // while a disk it writes to is low (a full state dir answered "ok" while jobs were lost).
  app.get("/healthz", function health(c) {
    const problems = [deps.stateDirSpace?.report(), deps.spool?.report()].flatMap((r) =>
      r?.low === true ? [r.message ?? `${r.path} is low on space`] : [],
    );
    return c.json(problems.length === 0 ? { status: "ok" } : { status: "degraded", problems });
  });

  app.get("/v1/diagnostics", async function diagnostics(c) {
    const { report: backend, verdict } = await readBackendHealth(deps);
    const tick = deps.reconciler.lastTick();
    return c.json({
      version: deps.version,
      backend: {
        name: deps.backend.name,
        healthy: verdict.healthy,
        message: verdict.message,
        calls: backend.calls,
        callsPerSecond: deps.reconciler.backendCallRate().perSecond,
        ...(backend.orphans === undefined ? {} : { orphans: orphansView(backend.orphans) }),
        ...(backend.profileChecks === undefined
          ? {}
          : {
              profileChecks: backend.profileChecks.map((check) => ({
                profile: check.profile,
                outcome: check.outcome,
                detail: check.detail,
                checkedAt: iso(check.checkedAt),
              })),
            }),
      },
      isolation: isolationView(deps),
      profiles: (deps.reconciler.profileBreakers?.() ?? []).map((b) => ({
        name: b.profile,
        consecutiveRejections: b.state.consecutiveRejections,
        degraded: degradedView(b.state),
      })),
      reconciler: {
        lastTick: tick
          ? {
              startedAt: iso(tick.startedAt),
              durationMs: tick.durationMs,
              backendCalls: tick.backendCalls,
              backendCallsTotal: tick.backendCallsTotal,
              backendUnavailable: tick.backendUnavailable,
              error: tick.error,
            }
          : null,
      },
      ...(deps.spool === undefined ? {} : { spool: spoolView(deps.spool.report()) }),
      ...(deps.stateDirSpace === undefined
        ? {}
        : { stateDir: spoolView(deps.stateDirSpace.report()) }),
    });
  });

  app.get("/metrics", async function prometheusText(c) {
    const [{ report: backend, verdict }, isolation] = await Promise.all([
      readBackendHealth(deps),
      isolationVerdict(deps),
    ]);
    // Every profile's labelled histograms exist from the first scrape, with zero counts: a
    // family absent until its first observation (no HELP or TYPE) reads as a broken exporter,
    // and a rate() over it has nothing to start from.
    for (const p of deps.backend.profiles()) {
      metrics.queueWait.get(p.name);
      if (p.kinds.includes("SESSION")) metrics.timeToReady.get(p.name);
    }
    const text = renderMetrics({
      isolationVerified: isolation.kind === "Verified",
      version: deps.version,
      now: deps.clock.now(),
      workloads: countLiveWorkloads(deps.store),
      owners: countLiveWorkloadsByOwner(deps.store),
      lastTick: deps.reconciler.lastTick(),
      requests,
      metrics,
      ...(deps.processFigures === undefined ? {} : { process: deps.processFigures() }),
      backend: {
        degraded: !verdict.healthy,
        calls: deps.reconciler.backendCallRate(),
        commands: backend.calls,
      },
      ...(backend.orphans === undefined ? {} : { orphans: backend.orphans }),
      isolation: isolationView(deps),
      ...(deps.spool === undefined ? {} : { spool: deps.spool.report() }),
      ...(deps.stateDirSpace === undefined ? {} : { stateDir: deps.stateDirSpace.report() }),
      profiles: profileBreakerFigures(deps, backend.profileChecks),
    });
    return c.body(text, 200, { "Content-Type": PROMETHEUS_CONTENT_TYPE });
  });

  app.get("/openapi.json", function openApi(c) {
    return c.json(document);
  });

  return app;
}
