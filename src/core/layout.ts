/**
 * Where things live. One place, so the daemon, the backends, the routes and the tests agree
 * on paths without passing strings around.
 *
 * Two roots, because they have opposite trust:
 *
 *  - the PRIVATE state dir (`root`): the database, the signing key, the admin token, the API
 *    socket, the lock, the backends' durable job records and the session attempt records.
 *    Only the daemon reads or writes it; it stays on the daemon's local disk.
 *  - the SPOOL (`spool`): workspaces, job logs, credential files. Jobs run in it and write
 *    to it; on a cluster it is on the filesystem the nodes share.
 *
 * Neither may contain the other: a job's working directory inside the private dir reached
 * `../../../admin-token` and `openai4s.db` (issue 8), and a private dir inside the spool is
 * the same mistake from the other side. `checkLayoutSeparation` enforces it at start.
 */
import { isAbsolute, join, relative } from "node:path";

export interface StateLayout {
  /** The private state dir. */
  readonly root: string;
  /** The spool: everything a job may see of its own. */
  readonly spool: string;
  readonly database: string;
  readonly signingKey: string;
  /** The worker gateway's TLS key and self-signed certificate (generated on first start). */
  readonly gatewayTlsKey: string;
  readonly gatewayTlsCert: string;
  readonly adminToken: string;
  readonly apiSocket: string;
  readonly lockFile: string;
  /** Every state-changing API request, one JSON line each; rotated to `.1` ... by size. */
  readonly auditLog: string;
  /** When the last whole backup left, one ISO line (the backup-age metric across restarts). */
  readonly lastBackup: string;
  /** Spool: one workload's files. */
  workloadDir(workloadId: string): string;
  /** Spool: the workload's working directory (kept across attempts). */
  workspaceDir(workloadId: string): string;
  /** Spool: one allocation's logs and credential files. */
  allocationDir(workloadId: string, allocationId: string): string;
  /** Spool: the job log of one allocation (what its command printed; read by `GET .../logs`). */
  jobLogPath(workloadId: string, allocationId: string, stream: LogStream): string;
  /**
   * Private: what the daemon records about one attempt and parses later (e.g. the session
   * attempt record). Never bound into an allocation, so code in it cannot rewrite it.
   */
  attemptRecordDir(workloadId: string, allocationId: string): string;
  /** Private: a backend's durable records (e.g. the local backend's job records). */
  backendDir(backendName: string): string;
  /** Spool: a backend's files that jobs or nodes must reach (e.g. an isolation probe). */
  backendSpoolDir(backendName: string): string;
}

export type LogStream = "stdout" | "stderr";

/** The job log file inside an allocation directory; backends name their log paths with it. */
export function allocationLogPath(allocationDir: string, stream: LogStream): string {
  return join(allocationDir, `${stream}.log`);
}

/** Names under the private dir, for the start-up ownership walk and the migration. */
const PRIVATE_NAMES = {
  database: "openai4s.db",
  signingKey: "signing-key",
  gatewayTlsKey: "gateway-tls.key",
  gatewayTlsCert: "gateway-tls.crt",
  adminToken: "admin-token",
  apiSocket: "api.sock",
  lockFile: "daemon.lock",
  auditLog: "audit.log",
  lastBackup: "last-backup",
  attempts: "attempts",
  backends: "backends",
} as const;

/** The spool's top-level directory of workloads (and, before the split, the state dir's). */
export const WORKLOADS_DIR = "workloads";

/**
 * The spool when none is configured: a sibling of the private dir, `STATE_DIR-spool`, never
 * a subdirectory. Inside the private dir, every job's cwd would have the database as an
 * ancestor's neighbour, and a job running as another uid could not even reach its own
 * workspace through the private dir's 0700.
 */
export function defaultSpoolDir(stateDir: string): string {
  return `${stateDir.replace(/\/+$/, "")}-spool`;
}

export function stateLayout(root: string, spool: string = defaultSpoolDir(root)): StateLayout {
  const workloadDir = (w: string) => join(spool, WORKLOADS_DIR, w);
  const allocationDir = (w: string, a: string) => join(workloadDir(w), "allocations", a);
  return {
    root,
    spool,
    database: join(root, PRIVATE_NAMES.database),
    signingKey: join(root, PRIVATE_NAMES.signingKey),
    gatewayTlsKey: join(root, PRIVATE_NAMES.gatewayTlsKey),
    gatewayTlsCert: join(root, PRIVATE_NAMES.gatewayTlsCert),
    adminToken: join(root, PRIVATE_NAMES.adminToken),
    apiSocket: join(root, PRIVATE_NAMES.apiSocket),
    lockFile: join(root, PRIVATE_NAMES.lockFile),
    auditLog: join(root, PRIVATE_NAMES.auditLog),
    lastBackup: join(root, PRIVATE_NAMES.lastBackup),
    workloadDir,
    workspaceDir: (w) => join(workloadDir(w), "workspace"),
    allocationDir,
    jobLogPath: (w, a, stream) => allocationLogPath(allocationDir(w, a), stream),
    attemptRecordDir: (w, a) => join(root, PRIVATE_NAMES.attempts, w, a),
    backendDir: (b) => join(root, PRIVATE_NAMES.backends, b),
    backendSpoolDir: (b) => join(spool, PRIVATE_NAMES.backends, b),
  };
}

/** True when `inner` is `outer` or below it (both absolute and already resolved). */
export function isWithin(outer: string, inner: string): boolean {
  const rel = relative(outer, inner);
  return rel === "" || (rel !== ".." && !rel.startsWith("../") && !isAbsolute(rel));
}

export type LayoutSeparation =
  | { readonly kind: "Separate" }
  | { readonly kind: "Overlapping"; readonly message: string };

/** Both paths real (symlinks resolved), so a link cannot hide an overlap. */
export function checkLayoutSeparation(realRoot: string, realSpool: string): LayoutSeparation {
  if (isWithin(realRoot, realSpool)) {
    return {
      kind: "Overlapping",
      message: `spool dir ${realSpool} is inside the private state dir ${realRoot}: jobs run in the spool and would reach the database, keys and admin token; choose a spool outside it`,
    };
  }
  if (isWithin(realSpool, realRoot)) {
    return {
      kind: "Overlapping",
      message: `private state dir ${realRoot} is inside the spool dir ${realSpool}: jobs could reach it; choose a spool that does not contain it`,
    };
  }
  return { kind: "Separate" };
}
