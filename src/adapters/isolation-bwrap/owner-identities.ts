/**
 * Run as the owner (issue 22): on a profile with `run_as = "owner"`, a principal's job runs
 * as the principal's own unix account (its uid, primary gid and supplementary groups), so
 * its files are the scientist's and a cluster's accounting charges the scientist. Every
 * other launch keeps the admin's choice (`base`: a leased uid per workload, or one account).
 *
 * Like a lease, the choice lives in the workspace's owner: the workspace directory is given
 * to the account when the job is prepared, and a caller that cannot say whose launch it is
 * (a step, an upload through an older path) finds the account from that owner, provided it
 * is a principal's account. A job can never change its workspace's owner (only root can
 * chown), so it cannot steer a later step to another account.
 */
import { lchownSync, lstatSync } from "node:fs";
import { type AccountDatabase, AccountUnusableError } from "../../core/accounts.ts";
import type { JobIdentities, LaunchSubject, RunAs } from "../../core/sandbox.ts";
import { ownerAccount } from "./run-as.ts";

export interface OwnerIdentitiesOptions {
  /** Who every other launch runs as (the admin's choice at start). */
  readonly base: JobIdentities;
  /** True for a profile whose work runs as its owner. */
  readonly runsAsOwner: (profile: string) => boolean;
  /** True when any profile does (the description says so only then). */
  readonly anyRunsAsOwner: () => boolean;
  /** The unix user a principal is (null: none, or no such principal any more). */
  readonly unixUserOf: (principal: string) => string | null;
  /** True when some principal is this unix user. */
  readonly isPrincipalAccount: (unixUser: string) => boolean;
  /**
   * The site's accounts (NSS), asked at every claim: accounts and group memberships change
   * while the daemon runs (the NSS adapter caches for seconds, not for the daemon's life).
   */
  readonly accounts: AccountDatabase;
  /** The lowest uid a job may run as (system accounts are below it). */
  readonly minUid: number;
}

export function ownerIdentities(options: OwnerIdentitiesOptions): JobIdentities {
  const { base } = options;

  /** The owner's account, or a throw naming what the admin (or the principal) must fix. */
  function accountFor(subject: LaunchSubject): RunAs {
    const where = `profile ${JSON.stringify(subject.profile)} runs work as its owner's unix account`;
    if (subject.owner === null) {
      throw new Error(`${where}, and the admin has none: submit with a principal's token`);
    }
    const user = options.unixUserOf(subject.owner);
    if (user === null) {
      throw new AccountUnusableError(
        `${where}, and principal ${JSON.stringify(subject.owner)} has no unix user (principal add NAME --unix-user USER)`,
      );
    }
    const resolved = ownerAccount(user, options.accounts, options.minUid);
    // The owner's account alone is at fault (deleted after they left, say): this workload
    // fails, and the profile's breaker never counts it (issue 32).
    if (resolved.kind === "Invalid")
      throw new AccountUnusableError(`${where}: ${resolved.message}`);
    return resolved.runAs;
  }

  /** The account that owns the workspace when it is a principal's (an owner-mode workspace). */
  function ownerOfWorkspace(workspaceDir: string): RunAs | null {
    let uid: number;
    try {
      uid = lstatSync(workspaceDir).uid;
    } catch {
      return null;
    }
    const name = options.accounts.nameOfUid(uid);
    if (name === null || !options.isPrincipalAccount(name)) return null;
    const resolved = ownerAccount(name, options.accounts, options.minUid);
    return resolved.kind === "Resolved" ? resolved.runAs : null;
  }

  return {
    switchesUid: base.switchesUid,
    get description() {
      return options.anyRunsAsOwner()
        ? `${base.description}; on run_as = "owner" profiles, the owner's own unix account`
        : base.description;
    },
    probe: base.probe,
    claim(workspaceDir, subject) {
      if (subject === undefined) return ownerOfWorkspace(workspaceDir) ?? base.claim(workspaceDir);
      if (!options.runsAsOwner(subject.profile)) return base.claim(workspaceDir, subject);
      const runAs = accountFor(subject);
      const st = lstatSync(workspaceDir);
      // The directory itself, never what a link points at: lchown follows nothing.
      if (!st.isDirectory()) throw new Error(`workspace ${workspaceDir} is not a directory`);
      if (st.uid !== runAs.uid || st.gid !== runAs.gid) {
        lchownSync(workspaceDir, runAs.uid, runAs.gid);
      }
      return runAs;
    },
  };
}
