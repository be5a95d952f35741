/**
 * An API over a temporary store and a scripted backend, called in process with
 * `app.request()`. Counters let tests assert "nothing written" and "reconciler woken".
 */

import { expect } from "bun:test";
import { readdirSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { openDatabase, type StoreDeps } from "../../src/adapters/store-sqlite/index.ts";
import { bindActivityRecorder } from "../../src/adapters/store-sqlite/stores/activity-recorder.ts";
import { bindAdmissionStore } from "../../src/adapters/store-sqlite/stores/admission-store.ts";
import { storeBackup } from "../../src/apps/daemon/store-backup.ts";
import { stateLayout } from "../../src/core/layout.ts";
import { mintSubmissionToken } from "../../src/core/models.ts";
import type { AllocationBackend } from "../../src/core/ports/allocation-backend.ts";
import { createPresence } from "../../src/core/session/presence.ts";
import type { SessionService } from "../../src/core/session/session-port.ts";
import {
  type ManualClock,
  manualClock,
  manualTimeline,
  systemTimers,
} from "../../src/lib/clock.ts";
import { memoryLog } from "../../src/lib/log.ts";
import { createApp } from "../../src/servers/http/app.ts";
import type { Access, ApiDeps, SpoolSpace, TickFigures } from "../../src/servers/http/deps.ts";
import type { BreakerState } from "../../src/servers/http/profiles/profile-view.ts";
import type { CallRateHistory } from "../../src/servers/http/ui/call-rate-history.ts";
import { fakeBackend } from "./fake-backend.ts";
import { makeTempDir, removeDir } from "./temp-dir.ts";

export interface Harness {
  readonly dir: string;
  readonly clock: ManualClock;
  readonly store: StoreDeps;
  readonly sqlite: import("bun:sqlite").Database;
  readonly app: ReturnType<typeof createApp>;
  readonly wakes: { count: number };
  /** What the API handed to the reconciler's `admitted`, in order. */
  readonly admitted: readonly { readonly workloadId: string; readonly attemptId: string | null }[];
  readonly log: ReturnType<typeof memoryLog>;
  tick: TickFigures | null;
  /** The reconciler's phase confirmations (epoch ms by allocation id); tests set them. */
  readonly confirmed: Map<string, number>;
  /** The reconciler's profile breakers; tests push open ones. */
  readonly breakers: { profile: string; state: BreakerState }[];
  /** What the reconciler's call watch says; tests flip it to Degraded. */
  backendHealth: { kind: "Healthy" } | { kind: "Degraded"; message: string };
  request(path: string, init?: RequestInit, access?: Access): Promise<Response>;
  post(path: string, body: unknown, headers?: Record<string, string>): Promise<Response>;
  rows(): { readonly workloads: number; readonly events: number; readonly allocations: number };
  close(): void;
}

export function harness(
  options: {
    readonly backend?: AllocationBackend;
    readonly sessions?: SessionService;
    readonly diagnosticsTimeoutMs?: number;
    readonly newWorkloadId?: () => string;
    /** Workloads are admitted with their first attempt minted, as the daemon does. */
    readonly mintsAtAdmission?: boolean;
    /** The spool's room (absent: not watched, nothing refused for space). */
    readonly spool?: SpoolSpace;
    readonly schedulerCallHistory?: CallRateHistory;
    /** The files routes' upload cap (default 1 MiB). */
    readonly maxUploadBytes?: number;
    /** Limits of principals added without their own (`serve --principal-max-*`). */
    readonly principalDefaults?: ApiDeps["principalDefaults"];
    readonly audit?: ApiDeps["audit"];
    /** The site's accounts `principal add` checks a unix user against (absent: unchecked). */
    readonly accounts?: ApiDeps["accounts"];
    /** Who a workspace's uploads are given to (default: the daemon's own uid). */
    readonly claimIdentity?: ApiDeps["files"]["claimIdentity"];
    /** Hosts and origins allowed beyond loopback (default: loopback only). */
    readonly browserGuard?: ApiDeps["browserGuard"];
    /** Sign-in through the site (OIDC, MUNGE), built over the harness's clock. */
    readonly siteIdentity?: (clock: ManualClock) => NonNullable<ApiDeps["siteIdentity"]>;
  } = {},
): Harness {
  const dir = makeTempDir("o4s-api-");
  const clock = manualClock();
  const opened = openDatabase(join(dir, "openai4s.db"));
  const store: StoreDeps = { db: opened.db, clock };
  const wakes = { count: 0 };
  const admitted: { workloadId: string; attemptId: string | null }[] = [];
  const log = memoryLog();
  const h: Harness = {
    dir,
    clock,
    store,
    sqlite: opened.sqlite,
    wakes,
    admitted,
    log,
    tick: null,
    confirmed: new Map(),
    breakers: [],
    backendHealth: { kind: "Healthy" },
    app: undefined as unknown as ReturnType<typeof createApp>,
    async request(path, init, access = { kind: "LocalSocket" }) {
      return await h.app.request(path, init, { access });
    },
    post(path, body, headers = {}) {
      return h.request(path, {
        method: "POST",
        headers: { "Content-Type": "application/json", ...headers },
        // Strings and bytes as they are: hostile bodies are not JSON values.
        body: typeof body === "string" || body instanceof Uint8Array ? body : JSON.stringify(body),
      });
    },
    rows() {
      const one = (table: string) =>
        (opened.sqlite.query(`SELECT count(*) AS n FROM ${table}`).get() as { n: number }).n;
      return {
        workloads: one("workloads"),
        events: one("events"),
        allocations: one("allocations"),
      };
    },
    close() {
      opened.close();
      removeDir(dir);
      // The logs routes write to the default spool, a sibling of the state dir: it was left
      // behind by every test that read a log.
      rmSync(stateLayout(dir).spool, { recursive: true, force: true });
    },
  };
  const deps: ApiDeps = {
    store,
    // Real timers, as before: keepalives and request deadlines are waited out by some tests.
    timers: systemTimers,
    // Presence as the daemon records it; its renewal runs on a timeline no test moves here.
    presence: createPresence({
      activity: bindActivityRecorder(store),
      log: memoryLog(),
      timers: manualTimeline(),
      renewMs: 10_000,
    }),
    admission: bindAdmissionStore(store),
    backend: options.backend ?? fakeBackend(),
    reconciler: {
      wake: () => {
        wakes.count += 1;
      },
      // Tests here play the reconciler by hand (they mint attempts into the store), so by
      // default a workload is admitted PENDING; `mintsAtAdmission` is the daemon's way.
      ...(options.mintsAtAdmission === true
        ? {
            newAttemptIds: () => ({
              allocationId: crypto.randomUUID(),
              token: mintSubmissionToken((n) => crypto.getRandomValues(new Uint8Array(n))),
            }),
          }
        : {}),
      admitted: (workload, attempt) => {
        wakes.count += 1;
        admitted.push({ workloadId: workload.id, attemptId: attempt?.id ?? null });
      },
      lastTick: () => h.tick,
      phaseConfirmedAt: (allocationId) => h.confirmed.get(allocationId) ?? null,
      profileBreakers: () => h.breakers,
      backendHealth: () => h.backendHealth,
      backendCallRate: () => ({ perSecond: 0.5, totals: { observe: 3 } }),
    },
    clock,
    log,
    logFile: stateLayout(dir).jobLogPath,
    backup: storeBackup(opened.sqlite, stateLayout(dir)),
    files: {
      spool: stateLayout(dir).spool,
      workspaceDir: stateLayout(dir).workspaceDir,
      claimIdentity: options.claimIdentity ?? (() => null),
      maxUploadBytes: options.maxUploadBytes ?? 1024 * 1024,
    },
    logPollMs: 20,
    version: "9.9.9-test",
    ...(options.sessions ? { sessions: options.sessions } : {}),
    ...(options.diagnosticsTimeoutMs !== undefined
      ? { diagnosticsTimeoutMs: options.diagnosticsTimeoutMs }
      : {}),
    ...(options.newWorkloadId ? { newWorkloadId: options.newWorkloadId } : {}),
    ...(options.spool ? { spool: options.spool } : {}),
    ...(options.schedulerCallHistory ? { schedulerCallHistory: options.schedulerCallHistory } : {}),
    ...(options.principalDefaults ? { principalDefaults: options.principalDefaults } : {}),
    ...(options.audit ? { audit: options.audit } : {}),
    ...(options.accounts ? { accounts: options.accounts } : {}),
    ...(options.browserGuard ? { browserGuard: options.browserGuard } : {}),
    ...(options.siteIdentity ? { siteIdentity: options.siteIdentity(clock) } : {}),
  };
  (h as { app: ReturnType<typeof createApp> }).app = createApp(deps);
  return h;
}

/**
 * Every path under dir with its size and mtime, the database's own files aside (their
 * pages are checked by counting rows): "no file written" is this, unchanged.
 */
export function snapshotFiles(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (d: string) => {
    for (const entry of readdirSync(d)) {
      const p = join(d, entry);
      if (entry.startsWith("openai4s.db")) continue;
      const s = statSync(p);
      out[p] = `${s.isDirectory() ? "dir" : s.size}:${s.mtimeMs}`;
      if (s.isDirectory()) walk(p);
    }
  };
  walk(dir);
  return out;
}

export async function problemOf(response: Response): Promise<{
  type: string;
  title: string;
  status: number;
  detail: string;
  errors: { path: string; message: string }[];
  reason?: string;
}> {
  expect(response.headers.get("content-type")).toContain("application/problem+json");
  return (await response.json()) as never;
}
