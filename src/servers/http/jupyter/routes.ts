/**
 * The Jupyter Server REST API that gateway clients use (jupyter_server's `--gateway-url`,
 * JupyterLab's services, nbclient through either): kernelspecs (one per SESSION profile),
 * kernels (a kernel is a SESSION workload), interrupt, restart, and the channels websocket.
 * Same listeners, same authentication and ownership as /v1 (app.ts): a principal sees only
 * its own kernels, and another's answers 404.
 */
import { Hono } from "hono";
import { getWorkload, listWorkloads, requestStop } from "../../../adapters/store-sqlite/index.ts";
import { envNameRefusal } from "../../../core/env-policy.ts";
import {
  isTerminal,
  type ProfileEnvironment,
  type ResourceProfile,
  type Workload,
} from "../../../core/models.ts";
import { type Caller, listScope } from "../../../core/principals.ts";
import type { ApiDeps, ApiEnv } from "../deps.ts";
import { ApiError, notFound } from "../problem.ts";
import { profileView } from "../profiles/profile-view.ts";
import { submitterFor } from "../submitter.ts";
import { parseWith, readJson } from "../validation.ts";
import { SubmitBody } from "../workloads/schemas.ts";
import { normalize, submitWorkload } from "../workloads/submit.ts";
import { createContentsRoutes } from "./contents-routes.ts";
import { createKernelHubs, type KernelHubs } from "./hub.ts";
import { kernelIdOf, workloadIdOf } from "./ids.ts";
import { KernelStartBody } from "./schemas.ts";
import { createSessionRoutes } from "./sessions-routes.ts";
import type { SocketHandlers } from "./socket.ts";
import { binaryToJson, jsonFraming, jsonToV1, V1_PROTOCOL, v1ToJson } from "./v1-framing.ts";

/** Kernel names a client uses for "plain Python": the default profile's kernel. */
const PYTHON_ALIASES: ReadonlySet<string> = new Set(["python3", "python"]);

/** What jupyter_server's gateway client and JupyterLab read from `GET /api`. */
const JUPYTER_API_VERSION = "2.14.0";

function sessionProfiles(deps: ApiDeps): readonly ResourceProfile[] {
  return deps.backend.profiles().filter((p) => p.kinds.includes("SESSION"));
}

function kernelspec(p: ResourceProfile, environment?: ProfileEnvironment) {
  return {
    name: environment === undefined ? p.name : `${p.name}/${environment.name}`,
    spec: {
      argv: [],
      display_name:
        environment === undefined ? `Python (${p.name})` : `${environment.displayName} (${p.name})`,
      language: "python",
      interrupt_mode: "message",
      env: {},
      metadata: {
        openai4s: {
          ...profileView(p),
          ...(environment === undefined ? {} : { environment: environment.name }),
        },
      },
    },
    resources: {},
  };
}

/** One kernelspec per SESSION profile, and one per environment it declares (`PROFILE/ENV`). */
function kernelspecs(profiles: readonly ResourceProfile[]) {
  return profiles.flatMap((p) => [
    kernelspec(p),
    ...(p.environments ?? []).map((e) => kernelspec(p, e)),
  ]);
}

function unavailable(): ApiError {
  return new ApiError({
    status: 409,
    slug: "sessions-disabled",
    title: "Sessions are not enabled",
    detail: "kernels are sessions, and this daemon has no worker gateway (OPENAI4S_WORKER_LISTEN)",
  });
}

/** The KERNEL_* variables of a launch request that the env policy allows, as strings. */
export function kernelEnv(given: unknown): Record<string, string> {
  if (typeof given !== "object" || given === null) return {};
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(given)) {
    if (!name.startsWith("KERNEL_") || envNameRefusal(name) !== null) continue;
    if (typeof value === "string") out[name] = value;
  }
  return out;
}

export function createJupyterRoutes(deps: ApiDeps): { app: Hono<ApiEnv>; hubs: KernelHubs | null } {
  const app = new Hono<ApiEnv>();
  const jupyter = deps.jupyter;
  const sessions = deps.sessions;
  const hubs =
    jupyter === undefined
      ? null
      : createKernelHubs({
          jupyter,
          interrupt: (id) =>
            sessions
              ? sessions.interrupt(id)
              : Promise.resolve({ kind: "NotReady", message: "sessions are not enabled" }),
          shutdown: (id) => {
            requestStop(deps.store, id, "USER_CANCELLED", "shut down by a Jupyter client");
            deps.reconciler.wake();
          },
          presence: deps.presence,
          now: () => deps.clock.now(),
          timers: deps.timers,
          log: deps.log,
        });

  if (hubs) deps.onDaemonStop?.(() => hubs.closeAll("the daemon is stopping; reconnect"));

  function model(w: Workload) {
    const activity = hubs?.activity(w.id);
    const lastMs = activity?.lastActivityMs ?? w.lastActiveAt ?? w.createdAt;
    return {
      id: kernelIdOf(w.id),
      name: w.spec.environment === undefined ? w.profile : `${w.profile}/${w.spec.environment}`,
      last_activity: new Date(lastMs).toISOString(),
      execution_state: isTerminal(w.phase) ? "dead" : (activity?.executionState ?? "starting"),
      connections: activity?.connections ?? 0,
    };
  }

  /** The live SESSION behind a kernel id (ownership was checked by app.ts). */
  function kernelOf(kernelId: string): Workload {
    const w = getWorkload(deps.store, workloadIdOf(kernelId));
    if (w?.kind !== "SESSION" || isTerminal(w.phase)) {
      throw notFound(`no kernel ${JSON.stringify(kernelId)}`);
    }
    return w;
  }

  app.get("/api", (c) => c.json({ version: JUPYTER_API_VERSION, openai4s: deps.version }));

  app.get("/api/kernelspecs", (c) => {
    const profiles = sessionProfiles(deps);
    const first = profiles.find((p) => p.name === "default") ?? profiles[0];
    return c.json({
      default: first?.name ?? null,
      kernelspecs: Object.fromEntries(kernelspecs(profiles).map((k) => [k.name, k])),
    });
  });

  app.get("/api/kernelspecs/:name", (c) => {
    const spec = kernelspecs(sessionProfiles(deps)).find((k) => k.name === c.req.param("name"));
    if (!spec) throw notFound(`no kernelspec ${JSON.stringify(c.req.param("name"))}`);
    return c.json(spec);
  });

  /**
   * Starts a kernel: a SESSION of the kernelspec's profile, by the same schema and
   * admission as POST /v1/workloads. "python3" is every notebook's (and jupyter_server's
   * gateway client's) default kernel name: it means the default profile unless a profile
   * has that name. Any other unknown name is refused by admission, naming the profile.
   * Gateway clients send the client's whole environment (nbclient: PATH, HOME, its own
   * gateway token): as Kernel and Enterprise Gateway do, only KERNEL_* variables reach the
   * kernel, and of those only names the env policy allows (a credential-shaped one is
   * dropped, never forwarded).
   */
  async function startKernel(caller: Caller, asked: string, givenEnv: unknown): Promise<Workload> {
    if (!jupyter) throw unavailable();
    const profiles = sessionProfiles(deps);
    const fallback = (profiles.find((p) => p.name === "default") ?? profiles[0])?.name ?? "default";
    // `PROFILE/ENV` is a profile's environment (its own kernelspec); admission refuses an
    // unknown one naming it.
    const slash = asked.indexOf("/");
    const environment = slash < 0 ? undefined : asked.slice(slash + 1);
    const base = slash < 0 ? asked : asked.slice(0, slash);
    const name =
      base === "" || (PYTHON_ALIASES.has(base) && !profiles.some((p) => p.name === base))
        ? fallback
        : base;
    const env = kernelEnv(givenEnv);
    const submission = normalize(
      parseWith(SubmitBody, {
        kind: "SESSION",
        profile: name,
        ...(environment === undefined ? {} : { environment }),
        ...(Object.keys(env).length > 0 ? { env } : {}),
      }),
    );
    const outcome = await submitWorkload(deps, submission, null, submitterFor(deps, caller));
    if (outcome.kind === "Admitted") deps.reconciler.admitted(outcome.workload, outcome.attempt);
    deps.log.info("kernel started", { workloadId: outcome.workload.id, profile: name });
    return outcome.workload;
  }

  app.post("/api/kernels", async function startKernelRoute(c) {
    if (!jupyter) throw unavailable();
    const given = parseWith(KernelStartBody, (await readJson(c, { emptyIsNone: true })) ?? {});
    const asked = typeof given["name"] === "string" ? given["name"] : "";
    // `path` (the notebook's) chooses nothing on the host and is not used.
    const workload = await startKernel(c.get("caller"), asked, given["env"]);
    c.header("Location", `/api/kernels/${kernelIdOf(workload.id)}`);
    c.set("createdWorkload", workload.id);
    return c.json(model(workload), 201);
  });

  app.get("/api/kernels", (c) => {
    const caller = c.get("caller");
    const live: Workload[] = [];
    let cursor: { readonly createdAt: number; readonly id: string } | undefined;
    // Every live session, a page at a time (a principal's own only).
    for (;;) {
      const page = listWorkloads(deps.store, {
        kind: "SESSION",
        limit: 500,
        ...listScope(caller),
        ...(cursor ? { cursor } : {}),
      });
      live.push(...page.items.filter((w) => !isTerminal(w.phase)));
      if (page.next === null) break;
      cursor = page.next;
    }
    return c.json(live.map(model));
  });

  app.get("/api/kernels/:kid", (c) => c.json(model(kernelOf(c.req.param("kid")))));

  app.delete("/api/kernels/:kid", (c) => {
    const w = kernelOf(c.req.param("kid"));
    requestStop(deps.store, w.id, "USER_CANCELLED", "shut down by a Jupyter client");
    deps.reconciler.wake();
    return c.body(null, 204);
  });

  app.post("/api/kernels/:kid/interrupt", async (c) => {
    const w = kernelOf(c.req.param("kid"));
    if (!sessions) throw unavailable();
    const outcome = await sessions.interrupt(w.id);
    if (outcome.kind === "NotReady") {
      throw new ApiError({
        status: 409,
        slug: "session-not-ready",
        title: "Kernel not ready",
        detail: outcome.message,
      });
    }
    return c.body(null, 204);
  });

  app.post("/api/kernels/:kid/restart", async (c) => {
    const w = kernelOf(c.req.param("kid"));
    if (!hubs) throw unavailable();
    const outcome = await hubs.restart(w.id);
    if (outcome.kind !== "Restarted") {
      const detail = outcome.kind === "NotFound" ? "no such kernel" : outcome.message;
      throw new ApiError({
        status: 409,
        slug: "kernel-not-restarted",
        title: "Kernel not restarted",
        detail,
      });
    }
    return c.json(model(getWorkload(deps.store, w.id) ?? w));
  });

  app.get("/api/kernels/:kid/channels", (c) => {
    const w = kernelOf(c.req.param("kid"));
    const upgrade = c.env?.upgrade;
    if (!hubs) throw unavailable();
    if (!upgrade || c.req.header("upgrade")?.toLowerCase() !== "websocket") {
      throw new ApiError({
        status: 400,
        slug: "websocket-required",
        title: "A websocket is required",
        detail: "GET /api/kernels/{id}/channels is a websocket (Upgrade: websocket)",
      });
    }
    let connection: ReturnType<KernelHubs["connect"]> | null = null;
    // The client's session (JupyterLab's clientId; where a gateway-mode server drops it, as
    // notebook 6 and jupyter_server 1.x do, the session its messages' headers name): what
    // the kernel says to it while this websocket is gone is kept for its next one. Scoped
    // to the caller, so a session id seen elsewhere opens nobody else's replay.
    const caller = c.get("caller");
    const sessionKeyOf = (sessionId: string | undefined): string | null =>
      sessionId === undefined || sessionId === "" || sessionId.length > 200
        ? null
        : `${caller.kind === "Principal" ? caller.name : ""}\u0000${sessionId}`;
    const sessionKey = sessionKeyOf(c.req.query("session_id"));
    // Bun selects the first protocol a client offers; JupyterLab offers only v1.
    const offered = c.req.header("sec-websocket-protocol")?.split(",")[0]?.trim() ?? "";
    const v1 = offered === V1_PROTOCOL;
    const handlers: SocketHandlers = {
      open(ws) {
        connection = hubs.connect(
          w.id,
          {
            send: (text) => void ws.send(v1 ? jsonToV1(text) : jsonFraming(text)),
            close: (code, reason) => ws.close(code, reason),
          },
          sessionKey,
          sessionKeyOf,
        );
      },
      message(_ws, message) {
        const text =
          typeof message === "string"
            ? message
            : v1
              ? v1ToJson(message)
              : (binaryToJson(message) ?? message.toString("utf8"));
        if (text !== null) connection?.onMessage(text);
      },
      close() {
        connection?.onClose();
      },
    };
    if (!upgrade(c.req.raw, handlers)) {
      throw new ApiError({
        status: 400,
        slug: "websocket-required",
        title: "Upgrade failed",
        detail: "not a websocket request",
      });
    }
    // Bun has taken the connection over; this answer is never sent.
    return new Response(null);
  });

  app.route("/", createSessionRoutes({ deps, model, kernelOf, startKernel }));
  app.route("/", createContentsRoutes(deps));

  return { app, hubs };
}
