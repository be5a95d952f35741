/**
 * `/api/sessions`: Jupyter Server's sessions, which bind a notebook (or console) path to a
 * kernel. JupyterLab and VS Code open a notebook through them. Which kernel a new session
 * gets, in order:
 *   1. `kernel.id`: that live kernel of the caller's;
 *   2. a notebook inside a session's directory (`w-abc/analysis.ipynb`): that session's
 *      kernel, the one whose working directory holds the notebook, so relative paths in
 *      the notebook find its files (the kernelspec asked is then not used: one directory,
 *      one kernel);
 *   3. otherwise a new kernel (a new SESSION) of `kernel.name`, as POST /api/kernels.
 * A path that already has a session gets that session back, as Jupyter Server does.
 *
 * Sessions are kept in the daemon's memory, as Jupyter Server keeps them by default: a
 * daemon restart forgets them (the kernels go on, and a client opens a new session on
 * them by kernel id). A session whose kernel ended is gone. Deleting a session shuts its
 * kernel down, as in Jupyter Server.
 */
import type { Context } from "hono";
import { Hono } from "hono";
import { getWorkload, requestStop } from "../../../adapters/store-sqlite/index.ts";
import { isTerminal, type Workload } from "../../../core/models.ts";
import { type Caller, mayUse, ownerOf } from "../../../core/principals.ts";
import type { ApiDeps, ApiEnv } from "../deps.ts";
import { notFound } from "../problem.ts";
import { parseWith, readJson } from "../validation.ts";
import { parseWorkspacePath } from "../workloads/file-path.ts";
import { SessionBody } from "./direct-schemas.ts";

export interface SessionRoutesDeps {
  readonly deps: ApiDeps;
  /** The kernel model of a workload (routes.ts: activity from the hubs). */
  readonly model: (w: Workload) => unknown;
  /** The live SESSION behind a kernel id, or a 404. */
  readonly kernelOf: (kernelId: string) => Workload;
  readonly startKernel: (caller: Caller, name: string, env: unknown) => Promise<Workload>;
}

interface JupyterSession {
  readonly id: string;
  path: string;
  name: string;
  type: string;
  workloadId: string;
  /** The principal that made it; null: the admin. */
  readonly owner: string | null;
}

export function createSessionRoutes(s: SessionRoutesDeps): Hono<ApiEnv> {
  const { deps } = s;
  const app = new Hono<ApiEnv>();
  const sessions = new Map<string, JupyterSession>();

  const live = (js: JupyterSession): Workload | null => {
    const w = getWorkload(deps.store, js.workloadId);
    return w === null || w === undefined || isTerminal(w.phase) ? null : w;
  };

  /** The caller's sessions whose kernels live; ended ones are forgotten as they are met. */
  function mine(caller: Caller): { js: JupyterSession; w: Workload }[] {
    const out: { js: JupyterSession; w: Workload }[] = [];
    for (const js of [...sessions.values()]) {
      const w = live(js);
      if (w === null) {
        sessions.delete(js.id);
        continue;
      }
      if (mayUse(caller, js.owner)) out.push({ js, w });
    }
    return out;
  }

  const view = (js: JupyterSession, w: Workload) => ({
    id: js.id,
    path: js.path,
    name: js.name,
    type: js.type,
    kernel: s.model(w),
    notebook: { path: js.path, name: js.name },
  });

  function sessionOf(c: Context<ApiEnv>): { js: JupyterSession; w: Workload } {
    const id = c.req.param("sid");
    const found = mine(c.get("caller")).find((x) => x.js.id === id);
    if (found === undefined) throw notFound(`no session ${JSON.stringify(id)}`);
    return found;
  }

  /** A live kernel the caller may use, by id; another principal's is the same 404. */
  function ownKernel(caller: Caller, kernelId: string): Workload {
    const w = s.kernelOf(kernelId);
    if (!mayUse(caller, w.owner ?? null)) {
      throw notFound(`no kernel ${JSON.stringify(kernelId)}`);
    }
    return w;
  }

  /** The live session whose directory holds `path`, if the caller may use it. */
  function directoryKernel(caller: Caller, path: string): Workload | null {
    const parsed = parseWorkspacePath(path.replace(/^\/+/, ""));
    if (parsed.kind === "Invalid" || parsed.parts.length < 2) return null;
    const w = getWorkload(deps.store, parsed.parts[0] as string);
    if (w?.kind !== "SESSION" || isTerminal(w.phase)) return null;
    return mayUse(caller, w.owner ?? null) ? w : null;
  }

  async function kernelFor(
    caller: Caller,
    path: string,
    kernel: { name?: string | null | undefined; id?: string | null | undefined } | null | undefined,
  ): Promise<Workload> {
    if (typeof kernel?.id === "string" && kernel.id !== "") return ownKernel(caller, kernel.id);
    return (
      directoryKernel(caller, path) ?? (await s.startKernel(caller, kernel?.name ?? "", undefined))
    );
  }

  app.get("/api/sessions", (c) => c.json(mine(c.get("caller")).map(({ js, w }) => view(js, w))));

  app.post("/api/sessions", async function createSession(c) {
    const caller = c.get("caller");
    const body = parseWith(SessionBody, await readJson(c, { emptyIsNone: true }));
    const path = body.path ?? body.notebook?.path ?? "";
    const same = mine(caller).find((x) => x.js.path === path && path !== "");
    if (same !== undefined) return c.json(view(same.js, same.w), 201);
    const w = await kernelFor(caller, path, body.kernel);
    const js: JupyterSession = {
      id: crypto.randomUUID(),
      path,
      name: body.name ?? "",
      type: body.type ?? "notebook",
      workloadId: w.id,
      owner: ownerOf(caller),
    };
    sessions.set(js.id, js);
    c.header("Location", `/api/sessions/${js.id}`);
    return c.json(view(js, w), 201);
  });

  app.get("/api/sessions/:sid", (c) => {
    const { js, w } = sessionOf(c);
    return c.json(view(js, w));
  });

  app.patch("/api/sessions/:sid", async function updateSession(c) {
    const { js } = sessionOf(c);
    const body = parseWith(SessionBody, await readJson(c));
    if (body.path !== undefined) js.path = body.path;
    if (body.name !== undefined) js.name = body.name;
    if (body.type !== undefined) js.type = body.type;
    const kernel = body.kernel;
    if (kernel !== undefined && kernel !== null && (kernel.id || kernel.name)) {
      // A kernel change (JupyterLab's "Change Kernel"): bound to the id given, or a new
      // kernel of the name; the one before is left running (it may be a session's own).
      const next = kernel.id
        ? ownKernel(c.get("caller"), kernel.id)
        : await s.startKernel(c.get("caller"), kernel.name ?? "", undefined);
      js.workloadId = next.id;
    }
    const w = live(js);
    if (w === null) throw notFound(`no session ${JSON.stringify(js.id)}`);
    return c.json(view(js, w));
  });

  app.delete("/api/sessions/:sid", (c) => {
    const { js, w } = sessionOf(c);
    sessions.delete(js.id);
    requestStop(
      deps.store,
      w.id,
      "USER_CANCELLED",
      "shut down by a Jupyter client (its session was deleted)",
    );
    deps.reconciler.wake();
    return c.body(null, 204);
  });

  return app;
}
