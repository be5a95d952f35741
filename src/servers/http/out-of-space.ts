/**
 * A write that failed for want of space, as the admin's problem it is: 503 STATE_DIR_FULL
 * (or SPOOL_FULL for a path in the spool) instead of 500 INTERNAL_ERROR, and a log line that
 * names the path that could not be written. A full state dir answered 500 with no path in
 * the log (issue 33).
 */
import { errorCode } from "../../lib/durable-fs.ts";
import type { Log } from "../../lib/log.ts";
import type { ApiDeps } from "./deps.ts";
import { ApiError } from "./problem.ts";

const FULL_CODES = new Set(["ENOSPC", "EDQUOT", "SQLITE_FULL"]);

export function outOfSpaceProblem(
  error: unknown,
  deps: Pick<ApiDeps, "stateDirSpace" | "spool">,
  log: Log,
  request: { readonly method: string; readonly path: string },
): ApiError | null {
  const code = errorCode(error);
  if (code === undefined || !FULL_CODES.has(code)) return null;
  const given = (error as { path?: unknown }).path;
  const spool = deps.spool?.report().path;
  const inSpool = typeof given === "string" && spool !== undefined && given.startsWith(`${spool}/`);
  // SQLite names no file: its only file is the store in the state dir.
  const path =
    typeof given === "string" ? given : (deps.stateDirSpace?.report().path ?? "the state dir");
  log.error("a write failed for want of space", { ...request, path, code });
  return new ApiError({
    status: 503,
    slug: inSpool ? "spool-full" : "state-dir-full",
    title: inSpool ? "Spool full" : "State dir full",
    detail: `the daemon could not write ${path} (${code}); nothing was created. Free space there and retry.`,
  });
}
