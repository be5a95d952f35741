/**
 * Isolation for a backend whose allocations run somewhere else (compute nodes): the sandbox
 * is put on the launch line of every allocation, and it is verified ON THE NODES, by running
 * the isolation probe as an allocation of that very backend. A check on the daemon's host
 * would prove nothing about a node that lacks bwrap or forbids namespaces.
 *
 * Both work through the AllocationBackend port only, so no backend has to know about them:
 *  - `sandboxedBackend` rewrites each submitted launch into its sandboxed form (paths:
 *    the workspace writable, the credential directory read-only; never the allocation dir)
 *    and its capability record says sessionIsolation, with the node verdict;
 *  - `verifyThroughBackend` lays the probe's two sibling allocations out under a directory
 *    the nodes see at the same path (the spool is shared with the nodes, or workers could
 *    not read their credentials), submits one short COMMAND allocation that starts a decoy
 *    sibling on the node and runs the sandboxed probe beside it, waits for the allocation to
 *    end, and judges what it printed exactly as the local probe does.
 */
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { decorateBackend } from "../../core/decorate-backend.ts";
import type { ProbeOutcome } from "../../core/isolation/background-verifier.ts";
import { allocationLogPath, type StateLayout, WORKLOADS_DIR } from "../../core/layout.ts";
import { isTerminal, mintSubmissionToken, type SubmissionToken } from "../../core/models.ts";
import type {
  AllocationBackend,
  BackendWith,
  IsolationVerdict,
  Launch,
  SubmitRequest,
  SubmitResult,
  TaskRunner,
} from "../../core/ports.ts";
import {
  type LaunchWrapper,
  NODE_TMP_PLACEHOLDER,
  type RunAs,
  type Sandbox,
  type SandboxMount,
  type SandboxPaths,
} from "../../core/sandbox.ts";
import { chmodDirBeneath, chownDirBeneath, makeDirBeneath } from "../../lib/beneath-fs.ts";
import { type Clock, pause } from "../../lib/clock.ts";
import type { Log } from "../../lib/log.ts";
import { boundMount, forbiddenRoots } from "../../lib/mount-sources.ts";
import { createProbeLayout, judgeProbe, PROBE_ENV } from "./probe.ts";

/**
 * Runs on the node, outside the sandbox: starts the decoy sibling (a `sleep` exec'd through
 * a symlink named $1, so its comm is unique), runs the sandboxed probe (the rest of the
 * arguments), and reports whether the decoy was alive throughout.
 */
const NODE_SCRIPT = `
name=$1; shift
d=$(mktemp -d) || exit 97
ln -s "$(command -v sleep)" "$d/$name" || exit 97
"$d/$name" 120 &
decoy=$!
i=0
while [ "$(cat /proc/$decoy/comm 2>/dev/null)" != "$name" ] && [ $i -lt 200 ]; do sleep 0.01; i=$((i+1)); done
"$@"
rc=$?
if [ "$(cat /proc/$decoy/comm 2>/dev/null)" = "$name" ]; then echo decoy-alive=yes; else echo decoy-alive=no; fi
kill $decoy 2>/dev/null
rm -rf "$d"
echo "node=$(hostname 2>/dev/null || uname -n)"
exit $rc
`;

/** The node name the probe printed, when it is one (it is kept with a remembered verdict). */
function probeNode(stdout: string): readonly string[] {
  const name = /^node=([A-Za-z0-9][A-Za-z0-9._-]{0,63})$/m.exec(stdout)?.[1];
  return name === undefined ? [] : [name];
}

export interface BackendProbeOptions {
  /** The backend as it submits (NOT the sandboxed wrapper: the probe wraps itself). */
  readonly backend: AllocationBackend;
  readonly sandbox: Sandbox;
  /** A directory the nodes see at the same path, below a root the sandbox masks. */
  readonly probeRoot: string;
  /** The profile the probe allocation runs on (one that offers SESSION). */
  readonly profile: string;
  readonly clock: Clock;
  readonly log: Log;
  /** Give up (and cancel the probe) after this long. Default 120 s. */
  readonly timeoutMs?: number;
  /** The probe job's own time limit (it runs for seconds). Default: `timeoutMs`. */
  readonly jobTimeLimitSeconds?: number;
  /** Between observations. Default 500 ms. */
  readonly pollIntervalMs?: number;
  /**
   * Stops the probe early (the daemon shuts down): the allocation is cancelled and the probe
   * is Inconclusive, so nothing keeps polling or writing into a spool being removed.
   */
  readonly signal?: AbortSignal;
}

const STOPPED: ProbeOutcome = {
  kind: "Inconclusive",
  message: "the isolation probe was stopped before it ended (shutting down)",
};

/**
 * One probe allocation, judged. Inconclusive when the deadline came before the probe ever
 * ran (still queued): that says nothing about the nodes, and must not refuse sessions that
 * an earlier probe verified (background-verifier.ts keeps the last verdict).
 */
export async function verifyThroughBackend(options: BackendProbeOptions): Promise<ProbeOutcome> {
  const { backend } = options;
  const timeoutMs = options.timeoutMs ?? 120_000;
  const pollIntervalMs = options.pollIntervalMs ?? 500;
  if (options.signal?.aborted) return STOPPED;
  mkdirSync(options.probeRoot, { recursive: true, mode: 0o700 });
  const root = mkdtempSync(join(options.probeRoot, "probe-"));
  const unverified = (message: string): IsolationVerdict => ({
    kind: "Unverified",
    message: `isolation probe on ${backend.name}: ${message}`,
  });
  try {
    const probeRunAs = options.sandbox.identities.probe;
    const layout = createProbeLayout(root, probeRunAs);
    const wrapped = options.sandbox.wrap(layout.argv, layout.paths, PROBE_ENV, probeRunAs);
    const launch: Launch = {
      kind: "COMMAND",
      command: ["/bin/sh", "-c", NODE_SCRIPT, "o4s-node-probe", layout.decoyName, ...wrapped],
      env: {},
    };
    const token = mintSubmissionToken((n) => randomBytes(n));
    const allocationId = `isolation-probe-${randomBytes(6).toString("hex")}`;
    const results = await backend.submit([
      {
        allocationId,
        workloadId: "isolation-probe",
        workloadKind: "BATCH",
        token,
        epoch: 0,
        profile: options.profile,
        name: "isolation-probe",
        launch,
        timeLimitSeconds: options.jobTimeLimitSeconds ?? Math.ceil(timeoutMs / 1000),
        allocationDir: layout.allocationDir,
        workspaceDir: layout.workspace,
      },
    ]);
    const submitted = results.get(token);
    if (!submitted) return unverified("the backend gave no answer for the probe");
    let handle: Parameters<AllocationBackend["observe"]>[0][number]["handle"];
    switch (submitted.kind) {
      case "Created":
      case "Existing":
        handle = submitted.handle;
        break;
      case "Rejected":
        return unverified(`the probe was refused: ${submitted.message}`);
      case "Unknown":
        return unverified(`the probe's submission is unknown: ${submitted.message}`);
      default: {
        const never: never = submitted;
        throw new Error(`unhandled submit result ${JSON.stringify(never)}`);
      }
    }
    const target = { allocationId, token, handle };
    const deadline = options.clock.now() + timeoutMs;
    let ended: { exitCode: number | null; phase: string } | null = null;
    let ran = false;
    while (ended === null) {
      if (options.signal?.aborted) {
        await backend.cancel([target]);
        return STOPPED;
      }
      if (options.clock.now() > deadline) {
        await backend.cancel([target]);
        const waited = `no result within ${Math.round(timeoutMs / 1000)} s`;
        return ran
          ? unverified(waited)
          : {
              kind: "Inconclusive",
              message: `isolation probe on ${backend.name} still queued: ${waited}`,
            };
      }
      const observed = await backend.observe([target]);
      if (observed.kind === "Observed") {
        const o = observed.observations.get(allocationId);
        if (o?.kind === "Observed" && o.phase !== "QUEUED") ran = true;
        if (o?.kind === "Observed" && isTerminal(o.phase)) {
          ended = { exitCode: o.exitCode, phase: o.phase };
          break;
        }
      }
      await pause(pollIntervalMs, options.signal);
    }
    const stdoutPath = allocationLogPath(layout.allocationDir, "stdout");
    const stdout = existsSync(stdoutPath) ? readFileSync(stdoutPath, "utf8") : "";
    const stderrPath = allocationLogPath(layout.allocationDir, "stderr");
    const stderr = existsSync(stderrPath) ? readFileSync(stderrPath, "utf8") : "";
    const verdict = judgeProbe(
      layout,
      {
        exitCode: ended.phase === "COMPLETED" ? 0 : (ended.exitCode ?? 1),
        stdout,
        stderr: stderr === "" ? `the probe allocation ended ${ended.phase}` : stderr,
        decoyAlive: /^decoy-alive=yes$/m.test(stdout),
      },
      `bubblewrap on the ${backend.name} nodes (private mount, PID and IPC namespaces, unprivileged uid, no capabilities)`,
    );
    return verdict.kind === "Verified"
      ? { ...verdict, nodes: probeNode(stdout) }
      : unverified(verdict.message);
  } catch (error) {
    return unverified(String(error));
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

/**
 * HOME inside: the workspace, the one place the job can write (the service account's home
 * is not in the sandbox, and jobs writing caches there failed).
 */
function homeOf(paths: SandboxPaths): string {
  const workspace = paths.writable[0];
  if (workspace === undefined) throw new Error("a launch without a workspace");
  return workspace;
}

/**
 * The wrapped form of a launch: the paths are the allocation's own, and the environment moves
 * from the launch (where the backend would hand it to host-side processes: the batch script,
 * the task launcher) onto the wrapped argv, applied inside, after the privilege drop.
 * `rankEnv`: the variable a cluster's task launcher sets per task (inherited by WORKERs);
 * `launchEnv`: variables the backend's own launch sets for every job (a deadline read when
 * the job starts), inherited by name when set.
 */
function wrapLaunch(
  launch: Launch,
  wrapper: LaunchWrapper,
  paths: SandboxPaths,
  runAs: RunAs | null,
  job: {
    readonly rankEnv: string;
    readonly taskEnv?: readonly string[];
    readonly baseEnv: Readonly<Record<string, string>>;
    readonly launchEnv?: readonly string[];
  },
): Launch {
  const launchEnv = job.launchEnv ?? [];
  const vars = { ...job.baseEnv, HOME: homeOf(paths), ...launch.env };
  switch (launch.kind) {
    case "COMMAND":
      if (launch.tasks !== undefined) {
        // Each task inherits the launcher's per-task variables (its rank, the node list, PMI's
        // descriptors) by name from the allowlist, and shares the node's /tmp and /dev/shm
        // with the allocation's other tasks there.
        const owner = runAs === null ? null : { uid: runAs.uid, gid: runAs.gid };
        const taskEnv = job.taskEnv ?? [];
        // The launcher's value of an allowlisted name wins over a job's own (a fixed value
        // would: env applies it last): a stray rank or PMI variable in a request must not
        // give every task the same rank or another task's PMI descriptor.
        const own = Object.fromEntries(
          Object.entries(vars).filter(([name]) => !taskEnv.includes(name)),
        );
        return {
          ...launch,
          command: wrapper.wrap(
            launch.command,
            { ...paths, nodeTmp: NODE_TMP_PLACEHOLDER },
            { vars: own, inherit: [...taskEnv, ...launchEnv] },
            runAs,
          ),
          tasks: { ...launch.tasks, owner },
          env: {},
        };
      }
      return {
        ...launch,
        command: wrapper.wrap(
          launch.command,
          paths,
          launchEnv.length === 0 ? { vars } : { vars, inherit: launchEnv },
          runAs,
        ),
        env: {},
      };
    case "WORKER":
      // The backend appends `--rank-env NAME` after the wrapped argv, i.e. after the job's
      // program: it reaches the worker unchanged, and the launcher's rank variable is copied
      // into the job's environment by name.
      return {
        ...launch,
        workerCommand: wrapper.wrap(
          launch.workerCommand,
          paths,
          { vars, inherit: [job.rankEnv, ...launchEnv] },
          runAs,
        ),
        env: {},
      };
    default: {
      const never: never = launch;
      throw new Error(`unhandled launch ${JSON.stringify(never)}`);
    }
  }
}

export interface WrappedBackendOptions {
  readonly wrapper: LaunchWrapper;
  /** The spool every allocation's directories lie below (reached with no link followed). */
  readonly spoolDir: string;
  /** The per-task rank variable of the backend's task launcher (see `wrapLaunch`). */
  readonly rankEnv: string;
  /**
   * What each task of a multi-task launch inherits from the launcher by name (its rank, the
   * node list, PMI's variables): the backend's documented allowlist, never the launcher's
   * whole environment. Absent: none.
   */
  readonly taskEnv?: readonly string[];
  /** What every job and step gets before its own variables (PATH). */
  readonly baseEnv: Readonly<Record<string, string>>;
  /**
   * The daemon's own trees (state dir, spool) no mount's source may resolve into; the host's
   * /proc, /sys, /dev and /etc are added. Default: the spool.
   */
  readonly mountForbidden?: readonly string[];
  /** Set by the backend's launch itself (e.g. the job's deadline); inherited by name. */
  readonly launchEnv?: readonly string[];
  /**
   * The allocation and workspace directories of an allocation, for steps (`runTask`) of
   * allocations this process did not submit (a daemon restart); null when unknown.
   */
  locate(
    allocationId: string,
  ): { readonly allocationDir: string; readonly workspaceDir: string } | null;
}

export interface SandboxedBackendOptions extends WrappedBackendOptions {
  readonly wrapper: Sandbox;
  /** The node verdict: the background verifier's last (background-verifier.ts). */
  verify(): Promise<IsolationVerdict>;
}

/** The paths a launch exposes: its workspace writable, its credentials (if any) read-only. */
function pathsOf(workspaceDir: string, credentialDir: string | null): SandboxPaths {
  // A BATCH allocation has no credential directory: binding a missing path fails the launch.
  // The allocation directory (logs, records the daemon reads) is never exposed.
  return { writable: [workspaceDir], readOnly: credentialDir === null ? [] : [credentialDir] };
}

/**
 * The backend with every launch wrapped (BATCH included: in the sandbox, a job outside it
 * could read a session's credential; without one, at least never as root and never with its
 * variables in a host-side process), and steps too: a step runs wrapped like its
 * allocation, or is refused when that allocation's directories cannot be found.
 */
export function wrappedBackend<B extends AllocationBackend>(
  backend: B,
  options: WrappedBackendOptions,
): AllocationBackend {
  const { wrapper } = options;
  const { jobEnv, tasks } = backend.capabilities;
  const mountForbidden = forbiddenRoots(options.mountForbidden ?? [options.spoolDir]);
  const submit: AllocationBackend["submit"] = async (requests) => {
    // The backend's environment rules, applied to what the job is given while it is still an
    // environment: once wrapped it is argv text the backend can no longer check. Admission
    // refused these already; a workload stored before a rule existed is refused here.
    const prepared: SubmitRequest[] = [];
    const refused = new Map<SubmissionToken, SubmitResult>();
    for (const r of requests) {
      if (jobEnv !== null) {
        const refusals = jobEnv.jobEnvRefusals(r.launch.env);
        if (refusals.length > 0) {
          const message = refusals.map((x) => x.message).join("; ");
          refused.set(r.token, { kind: "Rejected", token: r.token, message, byRequest: true });
          continue;
        }
      }
      const credentialDir = r.launch.kind === "WORKER" ? r.launch.credentialDir : null;
      let runAs: RunAs | null;
      try {
        // On the daemon's host, before the submission: the job's identity must own its
        // workspace (and read its credential) wherever it lands.
        makeDirBeneath(options.spoolDir, r.workspaceDir, { mode: 0o700 });
        runAs = wrapper.prepare({
          spoolDir: options.spoolDir,
          workspaceDir: r.workspaceDir,
          credentialDir,
          subject: { profile: r.profile, owner: r.owner ?? null },
        });
        if (runAs?.account !== undefined) openToAccount(options.spoolDir, r.allocationDir, runAs);
      } catch (error) {
        // This request only (no free uid, a directory that cannot be made): the others of
        // the batch still go, and this one is answered, never submitted.
        refused.set(r.token, {
          kind: "Rejected",
          token: r.token,
          message: `cannot prepare the job's directories and identity: ${String(error)}`,
        });
        continue;
      }
      const mounts = mountsFor(backend, r.profile, runAs?.account ?? null, wrapper, mountForbidden);
      if ("error" in mounts) {
        refused.set(r.token, { kind: "Rejected", token: r.token, message: mounts.error });
        continue;
      }
      // An owner's job is submitted AS the owner: it starts with their uid already, so the
      // launch drops nothing (a setpriv by a non-root process fails) and the sandbox makes
      // its own user namespace, exactly as for a daemon that is not root.
      const account = runAs?.account;
      prepared.push({
        ...r,
        ...(runAs !== null && account !== undefined
          ? { submitAs: { account, uid: runAs.uid, gid: runAs.gid } }
          : {}),
        launch: wrapLaunch(
          r.launch,
          wrapper,
          { ...pathsOf(r.workspaceDir, credentialDir), ...mounts },
          account === undefined ? runAs : null,
          options,
        ),
      });
    }
    if (prepared.length === 0) return refused;
    const answered = await backend.submit(prepared);
    return refused.size === 0 ? answered : new Map([...answered, ...refused]);
  };
  if (tasks === null) return decorateBackend(backend, { submit });
  const runTask: TaskRunner["runTask"] = async (target, command, taskOptions) => {
    const where = options.locate(target.allocationId);
    if (where === null) {
      return {
        kind: "Refused",
        message: "cannot find this allocation's directories to sandbox the step",
      };
    }
    const credentialDir = join(where.allocationDir, "credentials");
    // The step runs as its allocation does: the workspace's lease (claimed at its submit).
    let runAs: RunAs | null;
    try {
      runAs = wrapper.identities.claim(where.workspaceDir, taskOptions.subject);
    } catch (error) {
      return { kind: "Refused", message: `cannot tell who the step runs as: ${String(error)}` };
    }
    const subject = taskOptions.subject;
    const mounts =
      subject === undefined
        ? {}
        : mountsFor(backend, subject.profile, runAs?.account ?? null, wrapper, mountForbidden);
    if ("error" in mounts) return { kind: "Refused", message: mounts.error };
    const paths = {
      ...pathsOf(where.workspaceDir, existsSync(credentialDir) ? credentialDir : null),
      ...mounts,
    };
    // An owner's job takes its steps as the owner (as it was submitted): nothing to drop.
    const account = runAs?.account;
    const argv = wrapper.wrap(
      command,
      paths,
      { vars: { ...options.baseEnv, HOME: homeOf(paths) } },
      account === undefined ? runAs : null,
    );
    if (runAs === null || account === undefined) return tasks.runTask(target, argv, taskOptions);
    return tasks.runTask(target, argv, {
      ...taskOptions,
      submitAs: { uid: runAs.uid, gid: runAs.gid },
    });
  };
  return decorateBackend(backend, { submit }, { tasks: { runTask } });
}

/**
 * The profile's mounts for a job of `account`, resolved on the daemon's host (the nodes see
 * the same paths, as they see the spool), or why the launch is refused: a mount exists only
 * in the sandbox's namespace, so without a verified sandbox there is nowhere to bind it.
 */
function mountsFor(
  backend: AllocationBackend,
  profile: string,
  account: string | null,
  wrapper: LaunchWrapper,
  forbidden: readonly string[],
): { readonly mounts?: readonly SandboxMount[] } | { readonly error: string } {
  const declared = backend.profiles().find((p) => p.name === profile)?.mounts ?? [];
  if (declared.length === 0) return {};
  if (!wrapper.sandboxed) {
    return {
      error: `profile ${profile} declares mounts, and no sandbox is verified on the nodes to bind them in`,
    };
  }
  const mounts: SandboxMount[] = [];
  for (const m of declared) {
    const bound = boundMount(m, account, forbidden);
    if ("error" in bound) return bound;
    mounts.push(bound);
  }
  return { mounts };
}

/**
 * What a job submitted as its owner's account must reach on its own: the scheduler's step
 * daemon opens the job's logs in the allocation directory and changes into the workspace as
 * that account, not as root. The directories above them become searchable (0711: their names
 * stay unlistable) and the allocation directory is the account's; the daemon reads the logs
 * there with O_NOFOLLOW, so a link the job puts in their place is refused, never followed.
 */
function openToAccount(spoolDir: string, allocationDir: string, runAs: RunAs): void {
  const allocations = dirname(allocationDir);
  const workload = dirname(allocations);
  for (const dir of [dirname(workload), workload, allocations]) {
    chmodDirBeneath(spoolDir, dir, 0o711);
  }
  chownDirBeneath(spoolDir, allocationDir, runAs);
}

/** `wrappedBackend` in the sandbox, its record saying sessionIsolation with the node verdict. */
export function sandboxedBackend<B extends AllocationBackend>(
  backend: B,
  options: SandboxedBackendOptions,
): BackendWith<"sessionIsolation"> {
  return decorateBackend(
    wrappedBackend(backend, options),
    {},
    { sessionIsolation: { verifySessionIsolation: () => options.verify() } },
  );
}

/**
 * Finds an allocation's directories on disk (`<root>/workloads/<w>/allocations/<a>`): steps
 * are rare, and the directory tree is the record every attempt leaves behind anyway.
 */
export function locateInStateDir(
  layout: StateLayout,
): (
  allocationId: string,
) => { readonly allocationDir: string; readonly workspaceDir: string } | null {
  return (allocationId) => {
    const workloads = join(layout.spool, WORKLOADS_DIR);
    if (!existsSync(workloads)) return null;
    for (const w of readdirSync(workloads)) {
      const allocationDir = layout.allocationDir(w, allocationId);
      if (existsSync(allocationDir)) {
        return { allocationDir, workspaceDir: layout.workspaceDir(w) };
      }
    }
    return null;
  };
}
