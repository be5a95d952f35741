/**
 * A per-allocation sandbox built on bubblewrap (`bwrap`): every process an allocation starts
 * runs in its own mount, PID and IPC namespace in which the system directories are
 * read-only and the ONLY daemon-owned paths that exist are the ones the launch names (its
 * workspace, its credential directory). A sibling allocation of the same uid is therefore
 * not "protected by 0600": it is simply not there.
 *
 * The command line is the one measured in notes/isolation.md, plus what that measurement
 * showed was missing when the daemon runs as root:
 *  - the job never runs as uid 0. bwrap runs as root (so it can bind paths below the
 *    daemon's 0700 state dir), and inside the sandbox `setpriv` drops to the RunAs uid/gid
 *    with every capability set emptied and no_new_privs before the job's program starts.
 *    (uid 0 without capabilities still passes every DAC check on root-owned files: it
 *    could write /proc/sys/kernel/core_pattern, a way out.) A daemon that is not root runs
 *    bwrap in a user namespace (`--unshare-user`, `--cap-drop ALL`): the job keeps the
 *    daemon's uid but none of the daemon's files exist in its mount namespace.
 *  - /proc/sys read-only (bwrap's own /proc leaves it writable), /sys absent, and /etc
 *    reduced to an allowlist: no shadow, gshadow, sudoers, ssh keys, munge or scheduler
 *    secrets; each entry keeps its host mode. /tmp and /dev/shm are the allocation's own:
 *    the directories its backend made for it (`nodeTmp`), shared by the job and the steps
 *    run beside it and by nobody else's launch, or else a private tmpfs for this launch.
 *  - what is bound is a fixed set the daemon chose: system dirs, the /etc allowlist, the
 *    admin's read-only extras (the binary's dir), the launch's workspace and credential dir.
 *    Nothing is derived from the job's argv; host /proc, /sys, /dev and /etc never are.
 *  - the job's environment is applied by `env -i` after the privilege drop, never given to
 *    the host-side bwrap (see launch-argv.ts).
 *  - masked roots (the daemon's state directory): mounted as an empty tmpfs after the
 *    binary's directory is bound, so a binary installed ABOVE the state directory
 *    cannot re-expose every other allocation read-only through its own bind.
 *  - the network namespace is the profile's choice (`network`): "host" shares the host's
 *    (loopback services, the gateway's and the admin API's TCP ports are reachable), "none"
 *    adds `--unshare-net` (loopback only; a session's worker then dials the gateway through
 *    its unix socket, bound in read-only by the local backend).
 *
 * `verify()` proves all of that before anyone relies on it (see `probe`), and fails closed:
 * a missing bwrap, an error, a timeout or any unexpected answer is Unverified.
 *
 * Over 400 lines because the bind set, the argv and the checks that keep a job from choosing a bind are one reading, top to bottom.
 */
import { accessSync, constants } from "node:fs";
import { isAbsolute, normalize, resolve } from "node:path";
import type { IsolationVerdict } from "../../core/ports/allocation-backend.ts";
import type {
  JobEnv,
  JobIdentities,
  LaunchReach,
  RunAs,
  Sandbox,
  SandboxPaths,
} from "../../core/sandbox.ts";
import type { Clock } from "../../lib/clock.ts";
import type { Log } from "../../lib/log.ts";
import { claimAndPrepare, dropArgv, envArgv } from "./launch-argv.ts";
import { runIsolationProbe } from "./probe.ts";
import { fixedIdentities } from "./uid-leases.ts";

/** Read-only system directories; bound only when they exist where the launch runs. */
const SYSTEM_DIRS = ["/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32"] as const;

/**
 * The /etc entries programs need (name service, loader, TLS roots, time zone, locale,
 * Python's and matplotlib's config), each bound read-only when it exists. Everything else
 * of /etc is absent: shadow, gshadow, sudoers*, ssh host keys, munge and scheduler secrets.
 */
const ETC_ALLOWLIST = [
  "passwd",
  "group",
  "nsswitch.conf",
  "hosts",
  "host.conf",
  "resolv.conf",
  "gai.conf",
  "hostname",
  "localtime",
  "timezone",
  "ld.so.cache",
  "ld.so.conf",
  "ld.so.conf.d",
  "ssl/certs",
  "ssl/openssl.cnf",
  "pki/tls/certs",
  "pki/tls/openssl.cnf",
  "pki/ca-trust/extracted",
  "ca-certificates",
  "ca-certificates.conf",
  "alternatives",
  "os-release",
  "debian_version",
  "mime.types",
  "protocols",
  "services",
  "locale.alias",
  "default/locale",
  "locale.conf",
  "python3",
  "matplotlibrc",
  "fonts",
  "terminfo",
  "inputrc",
  "magic",
  "magic.mime",
] as const;

export interface BubblewrapOptions {
  /** Path to `bwrap`; default: looked up on PATH when verifying and wrapping. */
  readonly bwrapPath?: string;
  /** The identity jobs run as (the daemon runs as root); null: the daemon's own uid. */
  readonly runAs: RunAs | null;
  /** Who each launch runs as; default: `runAs` for every one. */
  readonly identities?: JobIdentities;
  readonly log: Log;
  /** Where the verification probe creates its two sibling allocations; default os.tmpdir(). */
  readonly tmpRoot?: string;
  /**
   * Directories hidden behind an empty tmpfs in every sandbox (the daemon's state dir), so
   * nothing but the launch's own paths below them is visible whatever else is bound.
   */
  readonly maskedRoots?: readonly string[];
  /**
   * Extra read-only directories every sandbox needs, e.g. the prefix of the Python that runs
   * the kernel when it is not under /usr. Never a directory above a masked root's siblings.
   */
  readonly readOnlyExtra?: readonly string[];
  /** How long a verdict is reused before `verify()` probes again. Default 60 s. */
  readonly cacheTtlMs?: number;
  /** Deadline for one probe run. Default 10 s. */
  readonly probeTimeoutMs?: number;
  /** The environment the probe's wrapper starts in (the daemon's). Default: an empty one. */
  readonly hostEnv?: Readonly<Record<string, string | undefined>>;
  readonly clock?: Clock;
}

export interface BubblewrapSandbox extends Sandbox {
  /** Forget the cached verdict and probe now (e.g. after an admin installed bwrap). */
  refresh(): Promise<IsolationVerdict>;
}

/** `bwrap` from an explicit path (must be executable) or from PATH; null when absent. */
export function resolveBwrap(bwrapPath: string | undefined): string | null {
  if (bwrapPath !== undefined) {
    try {
      accessSync(bwrapPath, constants.X_OK);
      return bwrapPath;
    } catch {
      return null;
    }
  }
  return Bun.which("bwrap");
}

function within(path: string, dir: string): boolean {
  return path === dir || path.startsWith(dir.endsWith("/") ? dir : `${dir}/`);
}

function coveredBySystem(dir: string): boolean {
  // /bin, /lib, ... are bound by their own entries; "/" itself would expose everything.
  return dir === "/" || SYSTEM_DIRS.some((s) => within(dir, s));
}

/**
 * Host trees no launch ever binds, whatever asks: the host's /proc shows every process (and
 * through /proc/PID/root and /cwd, every other allocation's files), /sys and /dev the
 * machine, and /etc its secrets (only the allowlist above is bound, entry by entry).
 */
const NEVER_BOUND = ["/proc", "/sys", "/dev", "/etc"] as const;

/**
 * Why `dir` cannot be a bind source, or null. Only daemon-chosen paths reach a bind (the
 * workspace, the credential dir, the binary's dir, the admin's extras), so a refusal here
 * is a bug or a misconfiguration, never a job's doing: it throws rather than quietly
 * launching with less. Lexically normal and absolute, so what bwrap binds is what was meant.
 */
export function unbindableReason(dir: string): string | null {
  if (!isAbsolute(dir)) return `not an absolute path: ${dir}`;
  if (normalize(dir) !== dir || (dir.length > 1 && dir.endsWith("/"))) {
    return `not a normalized path: ${dir}`;
  }
  if (dir === "/") return "the root directory would expose the whole host";
  const forbidden = NEVER_BOUND.find((root) => within(dir, root));
  return forbidden === undefined ? null : `${dir} is under the host's ${forbidden}`;
}

function checkedBind(dir: string): string {
  const reason = unbindableReason(dir);
  if (reason !== null) throw new Error(`refusing to bind into a sandbox: ${reason}`);
  return dir;
}

export interface WrapConfig {
  readonly bwrap: string;
  readonly maskedRoots: readonly string[];
  readonly readOnlyExtra: readonly string[];
  readonly runAs: RunAs | null;
}

/**
 * The bwrap argv. Order matters, because bwrap applies mounts in order: system dirs, /etc's
 * allowlist, fresh /proc (its /sys read-only), /dev with its own /dev/shm, /tmp, the
 * daemon's read-only extras (the binary's dir), then the masks, then the launch's writable
 * dirs, and its read-only dirs LAST so that a credential directory inside a writable
 * allocation directory ends up read-only. `--ro-bind-try` for system paths: on a cluster
 * the argv is built on the daemon's host and runs on a node.
 *
 * Nothing here is derived from `argv`: the program is looked up INSIDE the sandbox, by
 * `env` with the job's PATH, relative to the workspace (`--chdir`). The daemon once bound
 * the directory of argv[0] as it resolved it on the host (lexically, against its own cwd):
 * `x/../../../proc/uptime`, with `x` a symlink the job planted, bound the host's /proc.
 */
export function bubblewrapArgv(
  config: WrapConfig,
  argv: readonly string[],
  paths: SandboxPaths,
  env: JobEnv,
  reach: LaunchReach = {},
): readonly string[] {
  if (argv[0] === undefined) throw new Error("cannot sandbox an empty command");
  const out: string[] = [config.bwrap];
  for (const dir of SYSTEM_DIRS) out.push("--ro-bind-try", dir, dir);
  etcArgv(out);
  out.push("--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys", "--dev", "/dev");
  // Its own writable /dev/shm and /tmp: POSIX semaphores and shared memory live in /dev/shm,
  // and bwrap's /dev has it root-owned 0755, where multiprocessing.Pool died with EACCES.
  if (paths.nodeTmp === undefined) {
    out.push("--perms", "1777", "--tmpfs", "/dev/shm");
    out.push("--perms", "1777", "--tmpfs", "/tmp");
  } else {
    // The launches of one allocation on one node share these: MPI's shared-memory transport
    // finds its peers' segments there, and a step reads what the job left in /tmp. The
    // backend (or a node's task launcher) made them, owned by the job.
    const shared = checkedBind(paths.nodeTmp);
    out.push("--bind", `${shared}/shm`, "/dev/shm", "--bind", `${shared}/tmp`, "/tmp");
  }
  // After the private /tmp, or a binary installed under /tmp would be hidden by it.
  const parents = new Set<string>();
  for (const dir of new Set(config.readOnlyExtra)) {
    if (coveredBySystem(checkedBind(dir))) continue;
    bindWithParents(out, parents, "--ro-bind", dir);
  }
  for (const dir of config.maskedRoots) out.push("--tmpfs", checkedBind(dir));
  // A mask hides the parents made before it: made again, or they would be bwrap's 0700 and
  // an unprivileged job could not reach its own workspace (an absolute argv[0] into it: 126).
  parents.clear();
  for (const dir of paths.writable) bindWithParents(out, parents, "--bind", checkedBind(dir));
  for (const dir of paths.readOnly) bindWithParents(out, parents, "--ro-bind", checkedBind(dir));
  for (const dir of paths.readOnlyIfPresent ?? []) {
    bindWithParents(out, parents, "--ro-bind-try", checkedBind(dir));
  }
  // The admin's mounts, last: at their own targets, never over what is bound above.
  for (const m of paths.mounts ?? []) {
    makeParents(out, parents, m.target);
    out.push(m.mode === "ro" ? "--ro-bind" : "--bind", checkedBind(m.source), m.target);
  }
  // Relative program names and paths mean the workspace, never where the daemon runs.
  const workdir = paths.writable[0];
  if (workdir !== undefined) out.push("--chdir", workdir);
  // As root no user namespace: root's bwrap binds paths an unprivileged uid cannot even
  // traverse, and setpriv inside drops to RunAs. Not root: a user namespace, no capability.
  if (config.runAs === null) out.push("--unshare-user");
  out.push("--unshare-pid", "--unshare-ipc", "--die-with-parent", "--new-session");
  out.push(...networkArgs(reach));
  if (config.runAs === null) out.push("--cap-drop", "ALL");
  // Names to inherit come from the launching process (a task launcher's rank): keep its
  // (fixed, daemon-chosen) environment then; env -i inside sets the job's either way.
  if ((env.inherit ?? []).length === 0) out.push("--clearenv");
  const inner = envArgv(argv, env);
  out.push("--", ...(config.runAs === null ? inner : dropArgv(config.runAs, inner)));
  return out;
}

/** A profile without network gets its own namespace: loopback only, nothing of the host's. */
function networkArgs(reach: LaunchReach): readonly string[] {
  return reach.network === "none" ? ["--unshare-net"] : [];
}

/**
 * /etc: created 0755, then each allowlisted entry bound read-only with its host mode, and
 * the parents of nested entries (/etc/ssl for ssl/certs) made 0755 first: bwrap creates a
 * bind's missing parents 0700, and then no TLS client found the CA bundle and nobody could
 * resolve a user name.
 */
function etcArgv(out: string[]): void {
  out.push("--perms", "0755", "--dir", "/etc");
  const made = new Set<string>();
  for (const entry of ETC_ALLOWLIST) {
    const parts = entry.split("/");
    for (let i = 1; i < parts.length; i++) {
      const parent = `/etc/${parts.slice(0, i).join("/")}`;
      if (made.has(parent)) continue;
      made.add(parent);
      out.push("--perms", "0755", "--dir", parent);
    }
    out.push("--ro-bind-try", `/etc/${entry}`, `/etc/${entry}`);
  }
}

/**
 * A bind, its missing parents first created 0755: bwrap makes a bind's parents 0700, and
 * an unprivileged job could then not reach its own workspace below them. Parents that
 * exist already (a tmpfs, an earlier bind) are left as they are.
 */
function bindWithParents(out: string[], made: Set<string>, flag: string, dir: string): void {
  makeParents(out, made, dir);
  out.push(flag, dir, dir);
}

/** The missing parents of `dir`, made 0755 (see bindWithParents). */
function makeParents(out: string[], made: Set<string>, dir: string): void {
  const parts = dir.split("/").filter(Boolean);
  for (let i = 1; i < parts.length; i++) {
    const parent = `/${parts.slice(0, i).join("/")}`;
    if (made.has(parent) || coveredBySystem(parent)) continue;
    made.add(parent);
    out.push("--perms", "0755", "--dir", parent);
  }
}

/**
 * Verdict caching: the first `verify()` probes (the daemon calls it at startup), later calls
 * reuse the verdict for `cacheTtlMs`, and concurrent callers share one probe in flight. Both
 * verdicts expire: a Verified one so an uninstalled or broken bwrap is noticed within the
 * TTL instead of never, an Unverified one so installing bwrap needs no daemon restart.
 */
export function createBubblewrapSandbox(options: BubblewrapOptions): BubblewrapSandbox {
  const clock = options.clock ?? { now: () => Date.now() };
  const ttlMs = options.cacheTtlMs ?? 60_000;
  const maskedRoots = (options.maskedRoots ?? []).map((d) => resolve(d));
  const readOnlyExtra = (options.readOnlyExtra ?? []).map((d) => resolve(d));
  let cached: { readonly verdict: IsolationVerdict; readonly at: number } | null = null;
  let inFlight: Promise<IsolationVerdict> | null = null;

  const identities = options.identities ?? fixedIdentities(options.runAs);
  const probeRunAs = options.identities === undefined ? options.runAs : identities.probe;

  function config(runAs: RunAs | null): WrapConfig {
    // Wrapping with a missing bwrap yields a launch that fails with ENOENT: visible, and
    // never an unsandboxed run. Verification is what keeps SESSIONs from getting that far.
    const bwrap = resolveBwrap(options.bwrapPath) ?? options.bwrapPath ?? "bwrap";
    return { bwrap, maskedRoots, readOnlyExtra, runAs };
  }

  async function probeNow(): Promise<IsolationVerdict> {
    const bwrap = resolveBwrap(options.bwrapPath);
    if (bwrap === null) {
      const where = options.bwrapPath ?? "PATH";
      return { kind: "Unverified", message: `bubblewrap (bwrap) not found on ${where}` };
    }
    try {
      return await runIsolationProbe({
        tmpRoot: options.tmpRoot,
        timeoutMs: options.probeTimeoutMs ?? 10_000,
        runAs: probeRunAs,
        hostEnv: options.hostEnv ?? {},
        wrap: (argv, paths, env, probeRoot) =>
          bubblewrapArgv(
            {
              bwrap,
              maskedRoots: [...maskedRoots, probeRoot],
              readOnlyExtra,
              runAs: probeRunAs,
            },
            argv,
            paths,
            env,
          ),
      });
    } catch (error) {
      return { kind: "Unverified", message: `isolation probe failed: ${String(error)}` };
    }
  }

  function run(): Promise<IsolationVerdict> {
    if (inFlight) return inFlight;
    const started = clock.now();
    inFlight = probeNow()
      .then((verdict) => {
        cached = { verdict, at: started };
        if (verdict.kind === "Verified") {
          options.log.info("session isolation verified", { mechanism: verdict.mechanism });
        } else {
          options.log.warn("session isolation unavailable", { message: verdict.message });
        }
        return verdict;
      })
      .finally(() => {
        inFlight = null;
      });
    return inFlight;
  }

  return {
    mechanism: "bubblewrap",
    sandboxed: true,
    identities,
    wrap(argv, paths, env, runAs, reach) {
      return bubblewrapArgv(config(runAs), argv, paths, env, reach);
    },
    prepare(paths) {
      return claimAndPrepare(identities, paths);
    },
    verify() {
      if (cached && clock.now() - cached.at < ttlMs) return Promise.resolve(cached.verdict);
      return run();
    },
    refresh() {
      cached = null;
      return run();
    },
  };
}
