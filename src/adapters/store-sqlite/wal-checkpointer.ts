/**
 * Moves SQLite's WAL checkpoints off the writer's commits, onto a thread of their own.
 *
 * The failure it replaces: SQLite checkpoints automatically inside the commit that takes the
 * WAL past 1000 pages, so every ~25th reconciler tick at 10,000 live workloads (about 40 WAL
 * pages a tick) paid for copying ~4 MB into the database file and two fsyncs: 18-23 ms on a
 * quiet 2-core machine, 35 ms and more under load, against 4 ms for the other ticks. That
 * was the whole p95 of the steady tick, and any API write that happened to cross the line
 * paid the same.
 *
 * How: the daemon's connection stops checkpointing at 1000 pages (`wal_autocheckpoint` is
 * raised to a far backstop), and a worker thread with its own connection runs a PASSIVE
 * checkpoint every `intervalMs`. PASSIVE never waits for, nor blocks, the writer or a
 * reader: it copies what no reader still needs and leaves the rest for the next run. Once
 * all of the WAL is copied, the writer's next transaction starts the WAL over from its
 * beginning, so the file stays about as large as `intervalMs` of writes.
 *
 * Durability is SQLite's own: a commit is durable by the writer's `synchronous` setting
 * (FULL for a minted token, INV-8) before any checkpoint sees it; the checkpointer's
 * connection runs with synchronous=FULL, so it syncs the WAL before copying and the database
 * file before the WAL may be reused. A crash at any point of a checkpoint leaves the WAL
 * frames in place and the next open replays them; test/store/wal-checkpointer.test.ts kills
 * a writer mid-way and finds every commit it reported.
 *
 * If the thread cannot run (it failed to start or its connection failed), the daemon's
 * connection gets SQLite's default back (checkpoint at 1000 pages in the commit): the ticks'
 * tail returns, nothing is lost. The backstop bounds the WAL should the thread fall behind.
 */
import type { Database } from "bun:sqlite";
import { withDeadline } from "../../lib/clock.ts";
import type { Log } from "../../lib/log.ts";
import { WAL_CHECKPOINTER_ENTRYPOINT } from "../../thread-entrypoints.ts";

/** SQLite's own `wal_autocheckpoint` default, restored when the thread cannot do the work. */
export const SQLITE_DEFAULT_AUTOCHECKPOINT_PAGES = 1000;

export interface WalCheckpointerOptions {
  /** The database file the connection `sqlite` has open. */
  readonly path: string;
  readonly log: Log;
  /** How often the thread copies the WAL into the database file (default 250 ms). */
  readonly intervalMs?: number;
  /**
   * The writer's own automatic checkpoint, in WAL pages, while the thread runs: a backstop
   * that bounds the WAL if the thread falls behind, far enough that it never fires while it
   * keeps up (default 16384 pages, 64 MiB at 4 KiB pages).
   */
  readonly backstopPages?: number;
}

/** What the thread reports, one message per run; `stats()` keeps the newest. */
export interface CheckpointerStats {
  /** Checkpoints run so far. */
  readonly runs: number;
  /** Frames in the WAL at the last run, and how many of them are in the database file. */
  readonly walFrames: number;
  readonly copiedFrames: number;
}

export type CheckpointerState =
  | { readonly kind: "Starting" }
  | { readonly kind: "Running" }
  /** The thread could not do its work; the connection checkpoints in its commits again. */
  | { readonly kind: "Failed"; readonly message: string }
  | { readonly kind: "Stopped" };

export interface WalCheckpointer {
  state(): CheckpointerState;
  stats(): CheckpointerStats;
  /** Ends the thread after its current run; the connection keeps the backstop setting. */
  stop(): Promise<void>;
}

/** Main thread → checkpointer thread. */
export type CheckpointerCommand =
  | { readonly kind: "Start"; readonly path: string; readonly intervalMs: number }
  | { readonly kind: "Stop" };

/** Checkpointer thread → main thread. */
export type CheckpointerReport =
  | { readonly kind: "Ready" }
  | {
      readonly kind: "Checkpointed";
      /** Runs so far, this one included (the main thread may take several reports at once). */
      readonly runs: number;
      readonly walFrames: number;
      readonly copiedFrames: number;
    }
  | { readonly kind: "Failed"; readonly message: string }
  /** A run that found no room (a full disk); the thread goes on, the next run retries. */
  | { readonly kind: "Skipped"; readonly message: string }
  | { readonly kind: "Stopped" };

const DEFAULT_INTERVAL_MS = 250;
const DEFAULT_BACKSTOP_PAGES = 16_384;
const STOP_GRACE_MS = 5000;

export function startWalCheckpointer(
  sqlite: Database,
  options: WalCheckpointerOptions,
): WalCheckpointer {
  const { log } = options;
  const intervalMs = Math.max(1, Math.trunc(options.intervalMs ?? DEFAULT_INTERVAL_MS));
  const backstopPages = Math.max(1, Math.trunc(options.backstopPages ?? DEFAULT_BACKSTOP_PAGES));
  let state: CheckpointerState = { kind: "Starting" };
  let stats: CheckpointerStats = { runs: 0, walFrames: 0, copiedFrames: 0 };
  let stopped: (() => void) | null = null;
  let skipping = false;

  // From here on the commits of this connection no longer stop to checkpoint.
  sqlite.run(`PRAGMA wal_autocheckpoint = ${backstopPages}`);
  // smol: a small heap for a thread that only runs one PRAGMA now and then (~4 MB RSS).
  const worker = new Worker(WAL_CHECKPOINTER_ENTRYPOINT, { smol: true });
  // Never what keeps a process alive: a caller that forgets stop() still exits.
  worker.unref();

  const fail = (message: string) => {
    // After stop() the thread is going away anyway; only the waiter needs to hear it.
    if (state.kind === "Stopped") stopped?.();
    if (state.kind === "Failed" || state.kind === "Stopped") return;
    state = { kind: "Failed", message };
    // The work falls back to where SQLite does it by default: slower ticks, a bounded WAL.
    sqlite.run(`PRAGMA wal_autocheckpoint = ${SQLITE_DEFAULT_AUTOCHECKPOINT_PAGES}`);
    log.error("store: the WAL checkpointer thread failed; commits checkpoint again", {
      path: options.path,
      error: message,
    });
    worker.terminate();
    stopped?.();
  };

  worker.onmessage = (event: MessageEvent<CheckpointerReport>) => {
    const report = event.data;
    switch (report.kind) {
      case "Ready":
        if (state.kind === "Starting") state = { kind: "Running" };
        log.info("store: WAL checkpoints run on a thread of their own", { intervalMs });
        break;
      case "Checkpointed":
        if (skipping) {
          skipping = false;
          log.info("store: WAL checkpoints run again", { path: options.path });
        }
        stats = {
          runs: report.runs,
          walFrames: report.walFrames,
          copiedFrames: report.copiedFrames,
        };
        break;
      case "Failed":
        fail(report.message);
        break;
      case "Skipped":
        // Once per streak: a run every interval on a full disk must not flood the log.
        if (!skipping) {
          skipping = true;
          log.error("store: a WAL checkpoint found no room; retried until space returns", {
            path: options.path,
            error: report.message,
          });
        }
        break;
      case "Stopped":
        stopped?.();
        break;
      default: {
        const unreachable: never = report;
        throw new Error(`unhandled checkpointer report ${JSON.stringify(unreachable)}`);
      }
    }
  };
  worker.onerror = (event) => fail(event.message || "the checkpointer thread threw");
  // A thread that ends without a word (it crashed): the same fallback.
  worker.addEventListener("close", () => fail("the checkpointer thread exited"));
  const start: CheckpointerCommand = { kind: "Start", path: options.path, intervalMs };
  worker.postMessage(start);

  return {
    state: () => state,
    stats: () => stats,
    stop() {
      if (state.kind === "Failed" || state.kind === "Stopped") return Promise.resolve();
      state = { kind: "Stopped" };
      const done = new Promise<void>((resolve) => {
        stopped = resolve;
      });
      const stop: CheckpointerCommand = { kind: "Stop" };
      worker.postMessage(stop);
      // A run in progress finishes first (a checkpoint is one SQLite call); a thread that
      // does not answer must not hold the daemon's shutdown, so it is ended regardless.
      return withDeadline(done, STOP_GRACE_MS, () => {}).then(() => {
        worker.terminate();
      });
    },
  };
}
