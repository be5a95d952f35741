/**
 * Where a contents path leads. The contents root holds one directory per live SESSION the
 * caller may see (a principal its own, the admin every one), named by the workload id, and
 * each of those directories is that session's workspace: the kernel's working directory,
 * so the file browser shows the kernel's own files. `w-abc/data/in.csv` is `data/in.csv`
 * in workload w-abc's workspace.
 *
 * Another principal's session, an ended one and one that never existed are the same 404,
 * byte for byte (the path is the only thing named), so a path does not tell a principal
 * which workload ids exist.
 */
import {
  getWorkload,
  listWorkloads,
  type StoreDeps,
} from "../../../adapters/store-sqlite/index.ts";
import { isTerminal, type Workload } from "../../../core/models.ts";
import { type Caller, listScope, mayUse } from "../../../core/principals.ts";
import { parseWorkspacePath } from "../workloads/file-path.ts";
import {
  fileNotFound,
  pathRefused,
  type WorkspaceFilesDeps,
} from "../workloads/workspace-files.ts";
import type { Workspace } from "./contents-fs.ts";

export type Located =
  | { readonly kind: "Root" }
  | {
      readonly kind: "InSession";
      readonly ws: Workspace;
      /** The path as the client gave it, normalized (no trailing slash). */
      readonly path: string;
      /** Components inside the workspace; empty: the session's directory itself. */
      readonly inner: readonly string[];
    };

function visibleTo(caller: Caller, w: Workload | null): w is Workload {
  if (w === null || w.kind !== "SESSION" || isTerminal(w.phase)) return false;
  return mayUse(caller, w.owner ?? null);
}

/** Jupyter clients name directories with and without a trailing slash alike. */
function normalize(raw: string): string {
  return raw.replace(/\/+$/, "");
}

export function locate(
  store: StoreDeps,
  files: WorkspaceFilesDeps,
  caller: Caller,
  raw: string,
): Located {
  const path = normalize(raw);
  if (path === "") return { kind: "Root" };
  const parsed = parseWorkspacePath(path);
  if (parsed.kind === "Invalid") throw pathRefused(`${JSON.stringify(raw)}: ${parsed.message}`);
  const [top, ...inner] = parsed.parts;
  const workload = getWorkload(store, top as string) ?? null;
  if (!visibleTo(caller, workload)) throw fileNotFound(`${JSON.stringify(path)} does not exist`);
  return {
    kind: "InSession",
    ws: {
      files,
      workloadId: workload.id,
      subject: { profile: workload.profile, owner: workload.owner ?? null },
    },
    path,
    inner,
  };
}

/** The live sessions the root shows, oldest first. */
export function visibleSessions(store: StoreDeps, caller: Caller): Workload[] {
  const live: Workload[] = [];
  let cursor: { readonly createdAt: number; readonly id: string } | undefined;
  for (;;) {
    const page = listWorkloads(store, {
      kind: "SESSION",
      limit: 500,
      ...listScope(caller),
      ...(cursor ? { cursor } : {}),
    });
    live.push(...page.items.filter((w) => visibleTo(caller, w)));
    if (page.next === null) break;
    cursor = page.next;
  }
  return live.sort((a, b) => a.createdAt - b.createdAt);
}
