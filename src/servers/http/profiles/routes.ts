import { Hono } from "hono";
import type { ResourceProfile, WorkloadKind } from "../../../core/models.ts";
import {
  batchRefusal,
  type IsolationVerdict,
  sessionIsolationVerdict,
} from "../../../core/ports.ts";
import type { ApiDeps, ApiEnv } from "../deps.ts";
import { breakerStates, degradedView, type PlacementView, profileView } from "./profile-view.ts";

/**
 * Whether each kind a profile accepts can be placed now, and if not why: the same verdict
 * admission applies, so a client can tell "this profile takes sessions" from "a session
 * submitted now would be refused" before it submits.
 */
export function placement(
  profile: ResourceProfile,
  sessions: IsolationVerdict | null,
  batch: string | null,
): Readonly<Partial<Record<WorkloadKind, PlacementView>>> {
  const out: Partial<Record<WorkloadKind, PlacementView>> = {};
  for (const kind of profile.kinds) {
    if (kind === "SESSION" && sessions !== null && sessions.kind !== "Verified") {
      out[kind] = { placeable: false, reason: "ISOLATION_UNAVAILABLE", message: sessions.message };
    } else if (kind === "BATCH" && batch !== null) {
      out[kind] = { placeable: false, reason: "ISOLATION_UNAVAILABLE", message: batch };
    } else {
      out[kind] = { placeable: true, reason: null, message: null };
    }
  }
  return out;
}

/** The body of GET /v1/profiles (also the MCP tool list_profiles: one answer, two doors). */
export async function listProfiles(deps: ApiDeps) {
  const all = deps.backend.profiles();
  const sessions = all.some((p) => p.kinds.includes("SESSION"))
    ? await sessionIsolationVerdict(deps.backend)
    : null;
  const batch = batchRefusal(deps.backend);
  const breakers = breakerStates(deps.reconciler);
  return {
    profiles: all.map((p) => ({
      ...profileView(p),
      placement: placement(p, sessions, batch),
      degraded: degradedView(breakers.get(p.name)),
    })),
  };
}

export function createProfileRoutes(deps: ApiDeps) {
  const app = new Hono<ApiEnv>();

  app.get("/v1/profiles", async function profiles(c) {
    return c.json(await listProfiles(deps));
  });

  return app;
}
