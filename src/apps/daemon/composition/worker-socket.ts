/**
 * The worker gateway's unix socket: how a session's worker in a job without network (its own
 * network namespace, loopback only) reaches the gateway on the daemon's own machine. It sits
 * beside the admin socket in the private state dir (0700: nobody on the host reaches it), and
 * the local backend binds exactly this file into such a sandbox, read-only (connect(2) on a
 * socket needs no writable mount), so it is 0666: the job's uid must be able to connect.
 */
import { chmodSync, lstatSync, unlinkSync } from "node:fs";
import { dirname, join } from "node:path";
import type { StateLayout } from "../../../core/layout.ts";
import { errorCode } from "../../../lib/durable-fs.ts";

export function workerSocketPath(layout: StateLayout): string {
  return join(dirname(layout.apiSocket), "worker.sock");
}

/** A socket left by a daemon that died is removed; anything else there is not ours to delete. */
export function removeStaleWorkerSocket(path: string): void {
  try {
    if (!lstatSync(path).isSocket()) throw new Error(`${path} exists and is not a socket`);
    unlinkSync(path);
  } catch (error) {
    if (errorCode(error) !== "ENOENT") throw error;
  }
}

export function openWorkerSocketToJobs(path: string): void {
  chmodSync(path, 0o666);
}
