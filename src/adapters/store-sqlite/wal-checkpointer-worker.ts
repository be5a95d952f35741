/**
 * The checkpointer thread (wal-checkpointer.ts): its own connection to the store, a PASSIVE
 * checkpoint every interval, one report per run. Runs only as a Worker's entrypoint.
 */
import { Database } from "bun:sqlite";
import { systemTimers } from "../../lib/clock.ts";
import type { CheckpointerCommand, CheckpointerReport } from "./wal-checkpointer.ts";

declare const self: Worker;

let db: Database | null = null;
let cancelTimer: (() => void) | null = null;
let runs = 0;

function report(message: CheckpointerReport): void {
  self.postMessage(message);
}

function close(): void {
  cancelTimer?.();
  cancelTimer = null;
  db?.close();
  db = null;
}

function run(intervalMs: number): void {
  cancelTimer = null;
  if (db === null) return;
  try {
    // [busy, frames in the WAL, frames copied]: busy only means a reader or another
    // checkpoint held part of it back; the next run copies the rest.
    const row = db.query("PRAGMA wal_checkpoint(PASSIVE)").values()[0] as number[] | undefined;
    runs += 1;
    report({ kind: "Checkpointed", runs, walFrames: row?.[1] ?? 0, copiedFrames: row?.[2] ?? 0 });
  } catch (error) {
    // A full disk passes: the WAL keeps its frames and the next run copies them. Ending the
    // thread for it left the store checkpointing in its commits until the next restart,
    // long after space had returned (a full state dir, issue 33).
    if (!isFull(error)) {
      close();
      report({ kind: "Failed", message: String(error) });
      return;
    }
    report({ kind: "Skipped", message: String(error) });
  }
  cancelTimer = systemTimers.after(intervalMs, () => run(intervalMs));
}

function isFull(error: unknown): boolean {
  const code = (error as { readonly code?: unknown }).code;
  return code === "SQLITE_FULL" || code === "ENOSPC" || /disk is full/.test(String(error));
}

self.onmessage = (event: MessageEvent<CheckpointerCommand>) => {
  const command = event.data;
  switch (command.kind) {
    case "Start":
      try {
        // The store exists (the daemon opened and migrated it): never create one here.
        db = new Database(command.path, { readwrite: true, create: false });
        db.run("PRAGMA busy_timeout = 5000");
        // Sync the WAL before copying and the database file before the WAL is reused: a
        // power cut during or after a checkpoint must not take a commit that was durable.
        db.run("PRAGMA synchronous = FULL");
        // This connection only copies; it must never checkpoint on its own schedule either.
        db.run("PRAGMA wal_autocheckpoint = 0");
      } catch (error) {
        close();
        report({ kind: "Failed", message: String(error) });
        return;
      }
      report({ kind: "Ready" });
      cancelTimer = systemTimers.after(command.intervalMs, () => run(command.intervalMs));
      break;
    case "Stop":
      close();
      report({ kind: "Stopped" });
      break;
    default: {
      const unreachable: never = command;
      throw new Error(`unhandled checkpointer command ${JSON.stringify(unreachable)}`);
    }
  }
};
