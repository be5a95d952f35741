/**
 * Where things live under the state directory. One place, so the daemon, the backends and
 * the tests agree on paths without passing strings around.
 */
import { join } from "node:path";

export interface StateLayout {
  readonly root: string;
  readonly database: string;
  readonly signingKey: string;
  readonly adminToken: string;
  readonly apiSocket: string;
  workloadDir(workloadId: string): string;
  workspaceDir(workloadId: string): string;
  allocationDir(workloadId: string, allocationId: string): string;
  /** A job's captured output (written by the backend, read by `GET .../logs`). */
  logFile(workloadId: string, allocationId: string, stream: LogStream): string;
  /** Per-backend private area (e.g. the local backend's durable job records). */
  backendDir(backendName: string): string;
}

export type LogStream = "stdout" | "stderr";

export function stateLayout(root: string): StateLayout {
  return {
    root,
    database: join(root, "openai4s.db"),
    signingKey: join(root, "signing-key"),
    adminToken: join(root, "admin-token"),
    apiSocket: join(root, "api.sock"),
    workloadDir: (w) => join(root, "workloads", w),
    workspaceDir: (w) => join(root, "workloads", w, "workspace"),
    allocationDir: (w, a) => join(root, "workloads", w, "allocations", a),
    logFile: (w, a, stream) => join(root, "workloads", w, "allocations", a, `${stream}.log`),
    backendDir: (b) => join(root, "backends", b),
  };
}
