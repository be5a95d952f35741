/**
 * `OPENAI4S_SANDBOX_READONLY`: the admin's extra read-only directories in every sandbox (a
 * Python or toolchain prefix outside the system directories, e.g. /opt/conda). The sandbox
 * binds only what the daemon chose, never what a job's argv names; this is how a site
 * chooses more. Checked at start: a bad entry is exit 2 naming it, not a launch failure later.
 */
import { statSync } from "node:fs";
import { unbindableReason } from "../../../adapters/isolation-bwrap/bubblewrap.ts";
import { SANDBOX_READONLY_ENV } from "../config.ts";

export type SandboxReadOnly =
  | { readonly kind: "Dirs"; readonly dirs: readonly string[] }
  | { readonly kind: "ConfigError"; readonly message: string };

function within(path: string, dir: string): boolean {
  return path === dir || path.startsWith(`${dir}/`);
}

/**
 * The variable's entries (config.ts splits it) as absolute directories that exist here. Not
 * below a masked root (the state dir, the spool): those are hidden in every sandbox, so the
 * entry would bind nothing. Checked here, not in config.ts: it needs the state dir.
 */
export function sandboxReadOnlyDirs(
  entries: readonly string[],
  maskedRoots: readonly string[],
): SandboxReadOnly {
  const dirs: string[] = [];
  for (const dir of entries) {
    const bad = (why: string): SandboxReadOnly => ({
      kind: "ConfigError",
      message: `${SANDBOX_READONLY_ENV}: ${JSON.stringify(dir)} ${why}`,
    });
    const reason = unbindableReason(dir);
    if (reason !== null) return bad(`cannot be bound into a sandbox (${reason})`);
    const masked = maskedRoots.find((root) => within(dir, root));
    if (masked !== undefined) return bad(`is below ${masked}, which every sandbox hides`);
    try {
      if (!statSync(dir).isDirectory()) return bad("is not a directory");
    } catch (error) {
      return bad(`cannot be read: ${String(error)}`);
    }
    dirs.push(dir);
  }
  return { kind: "Dirs", dirs: [...new Set(dirs)] };
}
