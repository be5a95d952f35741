/**
 * Isolation for a backend whose allocations run somewhere else (compute nodes): the sandbox
 * is put on the launch line of every allocation, and it is verified ON THE NODES, by running
 * the isolation probe as an allocation of that very backend. A check on the daemon's host
 * would prove nothing about a node that lacks bwrap or forbids namespaces.
 *
 * Both work through the AllocationBackend port only, so no backend has to know about them:
 *  - `sandboxedBackend` (here) rewrites each submitted launch into its sandboxed form
 *    (paths: the workspace writable, the credential directory read-only; never the
 *    allocation dir) and its capability record says sessionIsolation, with the node verdict;
 *  - `verifyThroughBackend` (backend-probe.ts) runs the probe as one short allocation of
 *    that backend, under a directory the nodes see at the same path (the spool is shared
 *    with the nodes, or workers could not read their credentials), and judges what it
 *    printed exactly as the local probe does.
 *
 * Over 400 lines because the rewrite of each launch kind, the node-side environment it
 * inherits and who the scheduler submits it as (an owner's or a leased uid's account) are
 * one decision per launch, read top to bottom; splitting it would scatter that decision.
 */
import { existsSync, readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { AccountUnusableError } from "../../core/accounts.ts";
import { decorateBackend } from "../../core/decorate-backend.ts";
import { type StateLayout, WORKLOADS_DIR } from "../../core/layout.ts";
import type { SubmissionToken } from "../../core/models.ts";
import type {
  AllocationBackend,
  BackendWith,
  IsolationVerdict,
  Launch,
  SubmitRequest,
  SubmitResult,
  TaskRunner,
} from "../../core/ports/allocation-backend.ts";
import {
  type LaunchWrapper,
  NODE_TMP_PLACEHOLDER,
  type RunAs,
  type Sandbox,
  type SandboxMount,
  type SandboxPaths,
} from "../../core/sandbox.ts";
import { chmodDirBeneath, chownDirBeneath, makeDirBeneath } from "../../lib/beneath-fs.ts";
import { boundMount, forbiddenRoots } from "../../lib/mount-sources.ts";

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
            // One copy of each name: the per-task and the job's lists share some.
            { vars: own, inherit: [...new Set([...taskEnv, ...launchEnv])] },
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
   * A leased uid's account name, for a root daemon whose scheduler owns each job as the uid
   * it runs as (PMIx refused tasks not of the job's owner; accounting saw root: issue 32);
   * null: none (submitted as the daemon's, dropped inside). Absent: never (not root).
   */
  readonly accountOfUid?: (uid: number) => string | null;
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

/**
 * The paths a launch exposes: its workspace writable, its credentials (if any) read-only,
 * and a session's environment prefix read-only where the node has it (the kernel runs it and
 * cannot change it; a node without it is the worker's to report, by name).
 */
function pathsOf(
  workspaceDir: string,
  credentialDir: string | null,
  environmentPrefix: string | null = null,
): SandboxPaths {
  // A BATCH allocation has no credential directory: binding a missing path fails the launch.
  // The allocation directory (logs, records the daemon reads) is never exposed.
  return {
    writable: [workspaceDir],
    readOnly: credentialDir === null ? [] : [credentialDir],
    ...(environmentPrefix === null ? {} : { readOnlyIfPresent: [environmentPrefix] }),
  };
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
        // A job owned by its uid in the scheduler opens its own logs there.
        if (runAs !== null && submitterOf(runAs, options) !== null) {
          openToAccount(options.spoolDir, r.allocationDir, runAs);
        }
      } catch (error) {
        // This request only (no free uid, a directory that cannot be made): the others of
        // the batch still go, and this one is answered, never submitted.
        refused.set(r.token, preparationRefusal(r.token, error));
        continue;
      }
      const mounts = mountsFor(backend, r.profile, runAs?.account ?? null, wrapper, mountForbidden);
      if ("error" in mounts) {
        // The daemon's own check, not the scheduler's: answered at once (byRequest).
        refused.set(r.token, {
          kind: "Rejected",
          token: r.token,
          message: mounts.error,
          byRequest: true,
        });
        continue;
      }
      // An owner's job (or a leased uid's with an account) is submitted AS that uid: it
      // starts with it already, so the launch drops nothing (a setpriv by a non-root process
      // fails) and the sandbox makes its own user namespace, as for a daemon that is not root.
      const submitAs = submitterOf(runAs, options);
      prepared.push({
        ...r,
        ...(submitAs === null ? {} : { submitAs }),
        launch: wrapLaunch(
          r.launch,
          wrapper,
          {
            ...pathsOf(
              r.workspaceDir,
              credentialDir,
              r.launch.kind === "WORKER" ? (r.launch.environment?.prefix ?? null) : null,
            ),
            ...mounts,
          },
          submitAs === null ? runAs : null,
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
    // A job submitted as its uid takes its steps as that uid too: nothing to drop.
    const submitAs = submitterOf(runAs, options);
    const argv = wrapper.wrap(
      command,
      paths,
      { vars: { ...options.baseEnv, HOME: homeOf(paths) } },
      submitAs === null ? runAs : null,
    );
    if (submitAs === null) return tasks.runTask(target, argv, taskOptions);
    return tasks.runTask(target, argv, {
      ...taskOptions,
      submitAs: { uid: submitAs.uid, gid: submitAs.gid },
    });
  };
  return decorateBackend(backend, { submit }, { tasks: { runTask } });
}

/**
 * Who the scheduler is asked to own the job as: the owner's account, or a leased uid's when
 * it has one (accountOfUid); null: the daemon submits it and it drops to `runAs` inside.
 */
function submitterOf(
  runAs: RunAs | null,
  options: WrappedBackendOptions,
): { readonly account: string; readonly uid: number; readonly gid: number } | null {
  if (runAs === null) return null;
  const account = runAs.account ?? options.accountOfUid?.(runAs.uid) ?? null;
  return account === null ? null : { account, uid: runAs.uid, gid: runAs.gid };
}

/** A job whose preparation failed: its owner's unusable account is named as such. */
function preparationRefusal(token: SubmissionToken, error: unknown): SubmitResult {
  if (error instanceof AccountUnusableError) {
    return { kind: "Rejected", token, message: error.message, reason: "ACCOUNT_UNUSABLE" };
  }
  return {
    kind: "Rejected",
    token,
    message: `cannot prepare the job's directories and identity: ${String(error)}`,
  };
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
