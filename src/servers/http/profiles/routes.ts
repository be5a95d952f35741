import { Hono } from "hono";
import type { ResourceProfile, WorkloadKind } from "../../../core/models.ts";
import {
  batchRefusal,
  type IsolationVerdict,
  type ProfileCheck,
  sessionIsolationVerdict,
} from "../../../core/ports/allocation-backend.ts";
import type { Caller } from "../../../core/principals.ts";
import type { ApiDeps, ApiEnv } from "../deps.ts";
import {
  breakerStates,
  type DegradedProfileView,
  type PlacementView,
  profileDegradedView,
  profileView,
} from "./profile-view.ts";

/**
 * Whether each kind a profile accepts can be placed now, and if not why: the same verdict
 * admission applies, so a client can tell "this profile takes sessions" from "a session
 * submitted now would be refused" before it submits. A degraded profile (its breaker open,
 * or the scheduler refusing its dry run) places nothing now either: its workloads wait
 * `PENDING` or fail. It showed `placeable: true` beside `degraded`, and an agent choosing a
 * profile by placement picked the one the scheduler refuses.
 */
export function placement(
  profile: ResourceProfile,
  sessions: IsolationVerdict | null,
  batch: string | null,
  degraded: DegradedProfileView | null,
): Readonly<Partial<Record<WorkloadKind, PlacementView>>> {
  const out: Partial<Record<WorkloadKind, PlacementView>> = {};
  for (const kind of profile.kinds) {
    if (kind === "SESSION" && sessions !== null && sessions.kind !== "Verified") {
      out[kind] = { placeable: false, reason: "ISOLATION_UNAVAILABLE", message: sessions.message };
    } else if (kind === "BATCH" && batch !== null) {
      out[kind] = { placeable: false, reason: "ISOLATION_UNAVAILABLE", message: batch };
    } else if (degraded !== null) {
      out[kind] = { placeable: false, reason: degraded.reason, message: degraded.message };
    } else {
      out[kind] = { placeable: true, reason: null, message: null };
    }
  }
  return out;
}

/** The scheduler's last dry run of each profile, by name; none from a backend that runs none. */
export async function profileChecks(deps: ApiDeps): Promise<ReadonlyMap<string, ProfileCheck>> {
  // The backend's own report: cheap (no scheduler call), and a failure only hides the checks.
  const report = await deps.backend.diagnostics().catch(() => null);
  return new Map((report?.profileChecks ?? []).map((c) => [c.profile, c]));
}

/**
 * The body of GET /v1/profiles (also the MCP tool list_profiles: one answer, two doors),
 * as the caller may read it: a principal never reads the scheduler's own words.
 */
export async function listProfiles(deps: ApiDeps, caller: Caller) {
  const all = deps.backend.profiles();
  const sessions = all.some((p) => p.kinds.includes("SESSION"))
    ? await sessionIsolationVerdict(deps.backend)
    : null;
  const batch = batchRefusal(deps.backend);
  const breakers = breakerStates(deps.reconciler);
  const checks = await profileChecks(deps);
  return {
    profiles: all.map((p) => {
      const degraded = profileDegradedView(breakers.get(p.name), checks.get(p.name), caller);
      return { ...profileView(p), placement: placement(p, sessions, batch, degraded), degraded };
    }),
  };
}

export function createProfileRoutes(deps: ApiDeps) {
  const app = new Hono<ApiEnv>();

  app.get("/v1/profiles", async function profiles(c) {
    return c.json(await listProfiles(deps, c.get("caller")));
  });

  return app;
}
