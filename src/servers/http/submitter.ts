/**
 * Who a submission is made as, for every door that submits (the HTTP API, Jupyter's kernel
 * start, MCP's tools): the admin unowned and unlimited, a principal under its stored limits.
 * One function, so a door cannot submit a principal's work with no limit.
 */
import { getPrincipal } from "../../adapters/store-sqlite/index.ts";
import type { Submitter } from "../../core/admission.ts";
import type { Caller } from "../../core/principals.ts";
import type { ApiDeps } from "./deps.ts";

export function submitterFor(deps: ApiDeps, caller: Caller): Submitter {
  if (caller.kind === "Admin") return { owner: null, limits: null };
  const principal = getPrincipal(deps.store, caller.name);
  // Removed while its token was in flight: held to nothing rather than to no limit.
  return {
    owner: caller.name,
    limits: principal ?? { maxSessions: 0, maxBatch: 0, maxCpus: 0, maxGpus: 0 },
  };
}
