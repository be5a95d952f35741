/**
 * Drives the BUILT binary end to end: builds `dist/openai4s` when it is missing or older than
 * the sources, starts `openai4s serve` on a private state dir with the worker gateway on a
 * free port, and runs client commands against it. Every process it starts is found again by
 * the unique temporary directory in its command line, so teardown kills exactly those.
 */
import { Database } from "bun:sqlite";
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { join, relative } from "node:path";
import { cgroupDriver } from "../../src/adapters/backend-local/limit-enforcement.ts";
import { BINARY, ensureBuilt, ROOT } from "./binary.ts";
import { eventually } from "./eventually.ts";
import { makeTempDir, removeDir } from "./temp-dir.ts";

export { BINARY, ensureBuilt, ROOT };

export async function freePort(): Promise<number> {
  const server = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = server.port;
  server.stop(true);
  return port;
}

export interface CliResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

export interface Daemon {
  readonly dir: string;
  readonly stateDir: string;
  readonly socket: string;
  readonly proc: ReturnType<typeof Bun.spawn>;
  cli(...args: string[]): Promise<CliResult>;
  /** `show ID --json`, parsed. */
  show(id: string): Promise<WorkloadView>;
  stop(): Promise<void>;
  log(): string;
}

export interface ConditionView {
  readonly type: string;
  readonly status: string;
  readonly reason: string;
  readonly message: string;
  readonly lastTransitionTime: string | number;
}

export interface WorkloadView {
  readonly id: string;
  readonly kind: string;
  readonly phase: string;
  readonly reason: string | null;
  readonly message: string | null;
  readonly lastActiveAt: string | number | null;
  readonly conditions: readonly ConditionView[];
  readonly allocations: readonly {
    readonly id: string;
    readonly epoch: number;
    readonly phase: string;
    readonly startedAt: string | number | null;
    /** A job array's elements (the API's `array`); absent from daemons before it. */
    readonly array?: unknown;
  }[];
}

export function condition(w: WorkloadView, type: string): ConditionView | undefined {
  return w.conditions.find((c) => c.type === type);
}

/** Epoch ms from the API's time representation (ISO string or number). */
export function ms(t: string | number | null | undefined): number {
  if (t === null || t === undefined) return Number.NaN;
  return typeof t === "number" ? t : Date.parse(t);
}

export async function startDaemon(options: {
  readonly env?: Readonly<Record<string, string>>;
  readonly gateway?: boolean;
  /** Extra `serve` arguments, e.g. `--backend slurm --cluster-config FILE`. */
  readonly args?: readonly string[];
  /** How long to wait for the daemon to answer (a cluster backend verifies first). */
  readonly startTimeoutMs?: number;
  /** Run the daemon itself as this unprivileged uid (=gid), through setpriv; it owns `dir`. */
  readonly daemonUid?: number;
  /** An existing state dir (a restart of an earlier daemon's); default: a fresh one. */
  readonly stateDir?: string;
  /** The spool; default: `STATE_DIR-spool` (beside the state dir, on its filesystem). */
  readonly spoolDir?: string;
  /** Another build of the binary (a bench comparing with main's); default: this checkout's. */
  readonly binary?: string;
}): Promise<Daemon> {
  const binary = options.binary ?? BINARY;
  const dir = makeTempDir("o4s-e2e-session-");
  const uid = options.daemonUid;
  if (uid !== undefined) chownSync(dir, uid, uid);
  const prefix =
    uid === undefined
      ? []
      : ["setpriv", `--reuid=${uid}`, `--regid=${uid}`, "--clear-groups", "--"];
  const stateDir = options.stateDir ?? join(dir, "state");
  const socket = join(stateDir, "api.sock");
  const logPath = join(dir, "daemon.log");
  const env: Record<string, string> = {
    PATH: process.env["PATH"] ?? "/usr/bin:/bin",
    HOME: process.env["HOME"] ?? "/root",
    ...(options.gateway === false
      ? {}
      : { OPENAI4S_WORKER_LISTEN: `127.0.0.1:${await freePort()}` }),
    ...options.env,
  };
  // The spool named explicitly (a cluster backend requires it), where the default would be.
  const spoolArgs = ["--spool-dir", options.spoolDir ?? `${stateDir}-spool`];
  const serveArgs = ["serve", "--state-dir", stateDir, ...spoolArgs, ...(options.args ?? [])];
  const proc = Bun.spawn([...prefix, binary, ...serveArgs], {
    env,
    stdin: "ignore",
    stdout: Bun.file(logPath),
    stderr: Bun.file(logPath),
  });
  const daemon: Daemon = {
    dir,
    stateDir,
    socket,
    proc,
    async cli(...args) {
      const p = Bun.spawn([binary, ...args], {
        env: { ...env, OPENAI4S_SERVER: `unix:${socket}` },
        stdin: "ignore",
        stdout: "pipe",
        stderr: "pipe",
      });
      const [stdout, stderr, code] = await Promise.all([
        new Response(p.stdout).text(),
        new Response(p.stderr).text(),
        p.exited,
      ]);
      return { code, stdout, stderr };
    },
    async show(id) {
      const r = await daemon.cli("show", id, "--json");
      if (r.code !== 0) throw new Error(`show ${id} failed: ${r.stderr}`);
      return JSON.parse(r.stdout) as WorkloadView;
    },
    async stop() {
      proc.kill("SIGTERM");
      const timer = setTimeout(() => proc.kill("SIGKILL"), 10_000);
      await proc.exited;
      clearTimeout(timer);
      killProcessesMentioning(dir);
      removeJobCgroups(join(stateDir, "backends", "local"));
      removeDir(dir);
    },
    log: () => (existsSync(logPath) ? readFileSync(logPath, "utf8") : ""),
  };
  // An exit ends the wait at once: polling a dead daemon until the deadline hides why.
  const upOrExited = async () => {
    if (proc.exitCode !== null) return "exited" as const;
    return existsSync(socket) && (await daemon.cli("list")).code === 0 ? ("up" as const) : null;
  };
  const outcome = await eventually(upOrExited, {
    timeoutMs: options.startTimeoutMs ?? 15_000,
    intervalMs: 20,
  }).catch(() => "timed out" as const);
  if (outcome === "up") return daemon;
  if (outcome === "exited") throw new Error(`daemon exited ${proc.exitCode}:\n${daemon.log()}`);
  throw new Error(`daemon did not come up:\n${daemon.log()}`);
}

/**
 * The cgroups a local daemon made for its jobs: a job still running when the test stopped
 * the daemon keeps its cgroup (as it should), and killing its supervisor leaves it behind.
 * Removed here, or every such test would leave directories in the host's hierarchy.
 */
export function removeJobCgroups(backendDir: string): void {
  const found = cgroupDriver({ cgroupRoot: null, backendDir });
  if (found.kind !== "Driver") return;
  const driver = found.driver;
  try {
    for (const name of driver.jobNames()) {
      const job = driver.jobCgroup(name);
      driver.kill(job);
      for (let i = 0; i < 200 && !driver.remove(job); i++) Bun.sleepSync(10);
    }
    driver.removeRoot();
  } catch {
    // A hierarchy this test may not touch (an unprivileged run): nothing of ours is there.
  }
}

/** Pids of processes whose command line mentions `needle` (e.g. a test's temp dir). */
export function processesMentioning(needle: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^[0-9]+$/.test(entry)) continue;
    const pid = Number(entry);
    if (pid === process.pid) continue;
    try {
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, "utf8");
      const state = readFileSync(`/proc/${entry}/stat`, "utf8").split(") ")[1]?.[0];
      if (cmdline.includes(needle) && state !== "Z") pids.push(pid);
    } catch {
      // Gone meanwhile.
    }
  }
  return pids;
}

export function killProcessesMentioning(needle: string): void {
  for (const pid of processesMentioning(needle)) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // Gone meanwhile.
    }
  }
}

/**
 * A stand-in worker command that holds the real worker back while `HOLD` exists in its own
 * directory, then execs the real one. Its directory is bound read-only into the sandbox as
 * the executable's, and it is a live bind: removing HOLD outside is seen inside.
 */
export function holdingWorker(
  dir: string,
  /** A shell condition: only workers for which it holds are held back (default: all). */
  when = "true",
): { command: string; hold(): void; release(): void } {
  const wrapperDir = join(dir, "worker-wrapper");
  mkdirSync(wrapperDir, { recursive: true });
  const command = join(wrapperDir, "hold-then-worker.sh");
  const holdFile = join(wrapperDir, "HOLD");
  writeFileSync(
    command,
    `#!/bin/sh\nif ${when}; then\n  while [ -e "${holdFile}" ]; do sleep 0.05; done\nfi\nexec "${BINARY}" worker "$@"\n`,
  );
  chmodSync(command, 0o755);
  return {
    command,
    hold: () => writeFileSync(holdFile, ""),
    release: () => rmSync(holdFile, { force: true }),
  };
}

/** Tables a workload request writes; a refused one must leave every row as it was. */
const WORKLOAD_TABLES = ["workloads", "allocations", "events", "conditions", "workload_changes"];

/** Paths under `root` (relative, sorted, with their modes); none when it does not exist. */
function pathsUnder(root: string): string[] {
  if (!existsSync(root)) return [];
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir).sort()) {
      const p = join(dir, entry);
      const s = statSync(p);
      out.push(`${relative(root, p)} ${s.mode.toString(8)}`);
      if (s.isDirectory()) walk(p);
    }
  };
  walk(root);
  return out;
}

/**
 * Everything a refused workload request could have written, and nothing else: the store's
 * workload rows, the spool's workload dirs, the state dir's attempt records and backend
 * records. Not the bytes of `openai4s.db`, `-wal` or `-shm`: the WAL checkpoint thread
 * rewrites those within seconds of start with no request at all, and a digest of them made
 * the README's `npm test` red on a clean clone (issue 19).
 */
export function refusalFootprint(d: Pick<Daemon, "stateDir">): Record<string, unknown> {
  const db = new Database(join(d.stateDir, "openai4s.db"), { readonly: true });
  try {
    const rows: Record<string, unknown> = {};
    for (const table of WORKLOAD_TABLES) rows[table] = db.query(`SELECT * FROM ${table}`).all();
    return {
      rows,
      spoolWorkloads: pathsUnder(join(`${d.stateDir}-spool`, "workloads")),
      attemptRecords: pathsUnder(join(d.stateDir, "attempts")),
      backendRecords: pathsUnder(join(d.stateDir, "backends")),
    };
  } finally {
    db.close();
  }
}
