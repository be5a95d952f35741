/**
 * Which unix accounts a principal may be (issue 32). A principal's work may run as its
 * account (`run_as = "owner"`), so a principal mapped to root, to a system account
 * (`daemon`, `postgres`: uids below the floor) or to an account that does not exist is
 * refused when it is added, naming which, and a job whose owner's account became unusable
 * afterwards (the person left and the account was deleted) fails alone with
 * ACCOUNT_UNUSABLE, never counted against its profile: it once degraded the profile for
 * everyone. Pure: the password database is read behind the AccountLookup port.
 */

/** A unix account as the site's password and group databases describe it. */
export interface UnixAccount {
  readonly name: string;
  readonly uid: number;
  /** The primary group. */
  readonly gid: number;
  /** The primary and every supplementary group. */
  readonly groups: readonly number[];
}

/** The site's accounts (the password database, NSS): null when there is no such account. */
export interface AccountLookup {
  account(name: string): UnixAccount | null;
}

/**
 * The site's account and group databases by name and by id (NSS: files, LDAP, SSSD), for
 * the adapters that name a uid or resolve `--run-as USER:GROUP`.
 */
export interface AccountDatabase extends AccountLookup {
  /** The name of the account with this uid, or null when there is none. */
  nameOfUid(uid: number): string | null;
  /** The gid of the group with this name, or null when there is none. */
  groupId(name: string): number | null;
}

/** Below this, a uid is a system account (Debian's and RHEL's first user is 1000). */
export const DEFAULT_MIN_ACCOUNT_UID = 1000;
/** nobody, which services share (Debian and most Linux distributions). */
export const NOBODY_UID = 65534;

const ACCOUNT_NAME = /^[A-Za-z_][A-Za-z0-9_.-]{0,31}$/;

export type AccountCheck =
  | { readonly kind: "Usable"; readonly account: UnixAccount }
  | {
      readonly kind: "Unusable";
      /** What is wrong, e.g. "no-such-account": for a caller that answers by kind. */
      readonly problem: AccountProblem;
      /** Names the account and says why: `unix user "ann": no such account on this machine`. */
      readonly message: string;
    };

export type AccountProblem =
  | "not-a-name"
  | "no-such-account"
  | "root"
  | "below-floor"
  | "nobody"
  | "root-group";

/**
 * Whether work may run as `name`: it exists, is not root (uid 0), not a system account (uid
 * below `minUid`), not nobody, and neither its primary nor any supplementary group is root's.
 */
export function checkAccount(name: string, lookup: AccountLookup, minUid: number): AccountCheck {
  const unusable = (problem: AccountProblem, why: string): AccountCheck => ({
    kind: "Unusable",
    problem,
    message: `unix user ${JSON.stringify(name)}: ${why}`,
  });
  if (!ACCOUNT_NAME.test(name)) return unusable("not-a-name", "is not a user name");
  const account = lookup.account(name);
  if (account === null) return unusable("no-such-account", "no such account on this machine");
  if (account.uid === 0) return unusable("root", "is uid 0: jobs must never run as root");
  if (account.uid < minUid) {
    return unusable(
      "below-floor",
      `uid ${account.uid} is below the lowest uid jobs may run as (${minUid}, OPENAI4S_MIN_OWNER_UID): a system account`,
    );
  }
  if (account.uid === NOBODY_UID)
    return unusable("nobody", "is nobody, which other services share");
  if (account.gid === 0 || account.groups.includes(0)) {
    return unusable("root-group", "is in root's group (gid 0): jobs must never be");
  }
  return { kind: "Usable", account };
}

/**
 * Thrown by a job identity (JobIdentities.claim) when the owner's account cannot run the
 * work: the backends answer that submission Rejected with ACCOUNT_UNUSABLE, which fails the
 * workload alone and is never counted by the profile's breaker.
 */
export class AccountUnusableError extends Error {
  override readonly name = "AccountUnusableError";
}
