/**
 * The isolation probe: a concrete experiment, not a configuration check. It lays out two
 * sibling "allocations" A and B the way the daemon lays out real ones, plants a 0600 canary
 * in B's credential directory, starts a decoy sibling process with a unique name, and runs a
 * shell inside a sandbox built for A by the SAME wrap function real launches use. Verified
 * requires every one of:
 *  - the probe read A's marker (the sandbox is not so tight that a worker cannot work),
 *  - the probe wrote into A's workspace and the daemon reads it back (writable binds work),
 *  - B's canary does not exist for the probe (mount isolation),
 *  - no process named like the decoy is visible in the probe's /proc (PID isolation),
 *  - the probe holds no capability in any set (CapInh/CapPrm/CapEff/CapBnd/CapAmb) and has
 *    NoNewPrivs 1 (it cannot mount or setuid its way out),
 *  - it does not run as uid 0 (which owns every root-owned file it can reach),
 *  - no /proc/sys file (core_pattern: a `|program` there is run by the kernel as host root)
 *    and no /sys file is writable, and /etc/shadow does not exist for it.
 * Before trusting "absent", the probe checks the experiment was live: the decoy still runs
 * and the canary is readable from outside. A check that cannot fail proves nothing.
 */
import { randomBytes } from "node:crypto";
import {
  chmodSync,
  chownSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { IsolationVerdict } from "../../core/ports/allocation-backend.ts";
import type { JobEnv, RunAs, SandboxPaths } from "../../core/sandbox.ts";
import { sleep } from "../../lib/clock.ts";
import { createProgramRunner } from "../../lib/process-runner.ts";

export interface ProbeOptions {
  readonly tmpRoot: string | undefined;
  readonly timeoutMs: number;
  /** The identity real jobs run as: the probe's directories are given to it, as theirs are. */
  readonly runAs: RunAs | null;
  /**
   * The environment the wrapper starts in (the daemon's, handed down by the composition:
   * process.env is read only where the daemon starts); the wrapper sets the probe's own.
   */
  readonly hostEnv: Readonly<Record<string, string | undefined>>;
  /** Builds the sandboxed argv; `probeRoot` is the temporary root standing in for state. */
  wrap(
    argv: readonly string[],
    paths: SandboxPaths,
    env: JobEnv,
    probeRoot: string,
  ): readonly string[];
}

/** The probe's environment: what any job gets, nothing more. */
export const PROBE_ENV: JobEnv = { vars: { PATH: "/usr/bin:/bin", LANG: "C.UTF-8" } };

// Positional parameters: $1 marker path, $2 canary path, $3 decoy name, $4 file to write.
// Only shell builtins in the loops, so scanning a host's /proc (the failure case) is quick.
const PROBE_SCRIPT = `
marker=""
if read -r marker < "$1"; then printf 'marker=%s\\n' "$marker"; else echo marker-unreadable; fi
if [ -e "$2" ] || [ -d "$(dirname "$2")" ]; then echo canary=visible; else echo canary=absent; fi
decoy=absent
for f in /proc/[0-9]*/comm; do
  c=""
  read -r c < "$f" 2>/dev/null || continue
  if [ "$c" = "$3" ]; then decoy=visible; fi
done
echo "decoy=$decoy"
while read -r k v rest; do
  case "$k" in
    Uid:) echo "uid=$v $rest" ;;
    CapInh:|CapPrm:|CapEff:|CapBnd:|CapAmb:) echo "\${k%:}=$v" ;;
    NoNewPrivs:) echo "nnp=$v" ;;
  esac
done < /proc/self/status
for f in /proc/sys/kernel/core_pattern /proc/sys/kernel/modprobe /proc/sys/vm/drop_caches \
  /proc/sysrq-trigger /sys/kernel/uevent_helper /sys/kernel/mm/transparent_hugepage/enabled; do
  if [ -w "$f" ]; then echo "writable=$f"; fi
done
echo sensitive=checked
if [ -e /etc/shadow ]; then echo shadow=present; else echo shadow=absent; fi
if printf '%s' "$marker" > "$4"; then echo write=ok; else echo write=failed; fi
`;

const CAPABILITY_SETS = ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] as const;

const NO_CAPABILITIES = "0000000000000000";

function hex(bytes: number): string {
  return randomBytes(bytes).toString("hex");
}

function field(lines: readonly string[], key: string): string | null {
  const prefix = `${key}=`;
  const line = lines.find((l) => l.startsWith(prefix));
  return line === undefined ? null : line.slice(prefix.length);
}

function commOf(pid: number): string | null {
  try {
    return readFileSync(`/proc/${pid}/comm`, "utf8").trim();
  } catch {
    return null;
  }
}

/** The two sibling allocations of one probe run, laid out like real ones. */
export interface ProbeLayout {
  readonly root: string;
  readonly workspace: string;
  readonly allocationDir: string;
  readonly credentials: string;
  readonly marker: string;
  readonly markerPath: string;
  readonly canaryPath: string;
  readonly writtenPath: string;
  /** The decoy process's name (its comm): unique on any host. */
  readonly decoyName: string;
  /** The probe's argv, before sandboxing. */
  readonly argv: readonly string[];
  /** The paths a real allocation's launch would expose: A's, never B's. */
  readonly paths: SandboxPaths;
}

/**
 * Creates A (with its marker) and B (with its 0600 canary) under `root`, owned by `runAs`
 * like a real allocation's (so "B is not readable" is not merely "B is root's").
 */
export function createProbeLayout(root: string, runAs: RunAs | null): ProbeLayout {
  const workspace = join(root, "A", "workspace");
  const allocationDir = join(root, "A", "alloc");
  const credentials = join(allocationDir, "credentials");
  const bCredentials = join(root, "B", "alloc", "credentials");
  for (const dir of [workspace, credentials, join(root, "B", "workspace"), bCredentials]) {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
  }
  const marker = hex(16);
  const markerPath = join(workspace, "marker");
  writeFileSync(markerPath, `${marker}\n`, { mode: 0o600 });
  const canaryPath = join(bCredentials, "canary");
  writeFileSync(canaryPath, hex(16), { mode: 0o600 });
  chmodSync(canaryPath, 0o600);
  if (runAs !== null) {
    for (const path of [
      workspace,
      markerPath,
      credentials,
      join(root, "B", "workspace"),
      bCredentials,
      canaryPath,
    ]) {
      chownSync(path, runAs.uid, runAs.gid);
    }
  }
  const writtenPath = join(workspace, "written-by-probe");
  // The decoy's comm is the name of the file it was exec'd through (at most 15 chars), so a
  // symlink to sleep gives it a name no other process on the host has.
  const decoyName = `o4sdecoy${hex(3)}`;
  return {
    root,
    workspace,
    allocationDir,
    credentials,
    marker,
    markerPath,
    canaryPath,
    writtenPath,
    decoyName,
    argv: [
      "/bin/sh",
      "-c",
      PROBE_SCRIPT,
      "o4s-isolation-probe",
      markerPath,
      canaryPath,
      decoyName,
      writtenPath,
    ],
    // As a real launch: the workspace writable, the credential directory read-only, and the
    // allocation directory (logs, records the daemon reads) not there at all.
    paths: { writable: [workspace], readOnly: [credentials] },
  };
}

/**
 * The verdict from what the probe printed and left behind. `decoyAlive` and the canary's
 * presence are checked too: "absent" only means something if the canary and the decoy were
 * really there while the probe looked.
 */
export function judgeProbe(
  layout: ProbeLayout,
  run: {
    readonly exitCode: number;
    readonly stdout: string;
    readonly stderr: string;
    readonly decoyAlive: boolean;
  },
  mechanism: string,
): IsolationVerdict {
  if (run.exitCode !== 0) {
    return unverified(`probe sandbox exited ${run.exitCode}: ${run.stderr.trim().slice(0, 500)}`);
  }
  const lines = run.stdout.split("\n").map((l) => l.trim());
  const problems: string[] = [];
  if (field(lines, "marker") !== layout.marker) {
    problems.push("the probe could not read its own marker");
  }
  if (readSmallFile(layout.writtenPath) !== layout.marker) {
    problems.push("the probe could not write into its own workspace");
  }
  if (field(lines, "canary") !== "absent") {
    problems.push("a sibling allocation's credential directory was visible");
  }
  if (field(lines, "decoy") !== "absent") problems.push("a sibling process was visible");
  problems.push(...privilegeProblems(lines));
  if (!run.decoyAlive) problems.push("the decoy exited during the probe");
  if (readSmallFile(layout.canaryPath) === null) {
    problems.push("the canary vanished during the probe");
  }
  if (problems.length > 0) return unverified(problems.join("; "));
  return { kind: "Verified", mechanism };
}

/** What the probe reported about its identity and privileges, as problems. */
function privilegeProblems(lines: readonly string[]): string[] {
  const problems: string[] = [];
  for (const set of CAPABILITY_SETS) {
    const value = field(lines, set);
    if (value !== NO_CAPABILITIES) {
      problems.push(`the probe kept capabilities (${set} ${value ?? "unknown"})`);
    }
  }
  if (field(lines, "nnp") !== "1") problems.push("the probe could gain privileges (NoNewPrivs 0)");
  const uids = (field(lines, "uid") ?? "").split(/\s+/).filter(Boolean);
  if (uids.length !== 4 || uids.some((u) => !/^\d+$/.test(u))) {
    problems.push("the probe's uid could not be read");
  } else if (uids.includes("0")) {
    problems.push("the probe ran as uid 0");
  }
  const writable = lines.filter((l) => l.startsWith("writable=")).map((l) => l.slice(9));
  if (writable.length > 0) problems.push(`the probe could write ${writable.join(", ")}`);
  // No "writable=" line means nothing only if the loop that prints them ran to its end.
  if (field(lines, "sensitive") !== "checked") {
    problems.push("the probe never reported its check of /proc/sys and /sys");
  }
  if (field(lines, "shadow") !== "absent") problems.push("/etc/shadow existed for the probe");
  return problems;
}

/** Per stream: the probe prints a few lines; more is not a probe talking. */
const PROBE_OUTPUT_CAP_BYTES = 64 * 1024;

const LOCAL_MECHANISM =
  "bubblewrap (private mount, PID and IPC namespaces, unprivileged uid, no capabilities)";

export async function runIsolationProbe(options: ProbeOptions): Promise<IsolationVerdict> {
  const root = mkdtempSync(join(options.tmpRoot ?? tmpdir(), "o4s-isolation-probe-"));
  let decoy: ReturnType<typeof Bun.spawn> | null = null;
  try {
    const layout = createProbeLayout(root, options.runAs);
    const decoyLink = join(root, layout.decoyName);
    symlinkSync(Bun.which("sleep") ?? "/bin/sleep", decoyLink);
    decoy = Bun.spawn([decoyLink, "60"], { stdin: "ignore", stdout: "ignore", stderr: "ignore" });
    if (!(await waitForComm(decoy.pid, layout.decoyName, 2000))) {
      return unverified("the decoy sibling process did not start; cannot test PID isolation");
    }
    const [program, ...args] = options.wrap(layout.argv, layout.paths, PROBE_ENV, root);
    if (program === undefined) return unverified("the sandbox gave no command to run");
    const ran = await createProgramRunner().run({
      program,
      args,
      // The wrapper's argv is absolute or found on the daemon's PATH, as a spawn finds it.
      searchPath: options.hostEnv["PATH"] ?? "",
      // The daemon's environment, as before: the wrapper sets the probe's own (PROBE_ENV).
      env: Object.fromEntries(
        Object.entries(options.hostEnv).filter((e): e is [string, string] => e[1] !== undefined),
      ),
      cwd: layout.workspace,
      timeoutMs: options.timeoutMs,
      maxOutputBytes: PROBE_OUTPUT_CAP_BYTES,
      overflow: "truncate",
      killGraceMs: 0,
    });
    switch (ran.kind) {
      case "NotFound":
        return unverified(`cannot start the sandbox: ${ran.message}`);
      case "TimedOut":
        return unverified(`the probe did not finish within ${options.timeoutMs} ms`);
      case "Overflowed":
        return unverified("the probe's output overflowed");
      case "Exited":
        break;
      default: {
        const never: never = ran;
        throw new Error(`unhandled outcome ${JSON.stringify(never)}`);
      }
    }
    const { stdout, stderr, exitCode } = ran;
    if (exitCode === null) return unverified(`the probe was killed by ${ran.signal ?? "a signal"}`);
    const decoyAlive = commOf(decoy.pid) === layout.decoyName;
    return judgeProbe(layout, { exitCode, stdout, stderr, decoyAlive }, LOCAL_MECHANISM);
  } finally {
    if (decoy) {
      decoy.kill("SIGKILL");
      await decoy.exited;
    }
    rmSync(root, { recursive: true, force: true });
  }
}

function unverified(message: string): IsolationVerdict {
  return { kind: "Unverified", message: `isolation probe: ${message}` };
}

function readSmallFile(path: string): string | null {
  try {
    return readFileSync(path, "utf8").trim();
  } catch {
    return null;
  }
}

async function waitForComm(pid: number, name: string, deadlineMs: number): Promise<boolean> {
  const until = Date.now() + deadlineMs;
  while (Date.now() < until) {
    if (commOf(pid) === name) return true;
    await sleep(5);
  }
  return false;
}
