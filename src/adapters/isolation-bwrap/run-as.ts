/**
 * Which unprivileged identity jobs run as when the daemon runs as root (`serve --run-as`,
 * `OPENAI4S_RUN_AS`): `USER` (its uid and primary gid from the password database),
 * `UID` (gid = uid) or `UID:GID` / `USER:GROUP`. The default is `nobody`. Whatever the
 * spelling, uid 0 and gid 0 are refused: the point is that sandboxed code never owns what
 * root owns.
 */
import { readFileSync } from "node:fs";
import {
  type AccountDatabase,
  type AccountLookup,
  checkAccount,
  DEFAULT_MIN_ACCOUNT_UID,
} from "../../core/accounts.ts";
import type { RunAs } from "../../core/sandbox.ts";
import { DEFAULT_UID_RANGE, type UidRange } from "./uid-leases.ts";

export const RUN_AS_ENV = "OPENAI4S_RUN_AS";
export const UID_RANGE_ENV = "OPENAI4S_UID_RANGE";
const DEFAULT_RUN_AS = "nobody";
/** nobody/nogroup on Debian and most Linux distributions. */
const NOBODY_ID = 65534;

export type RunAsResolution =
  | { readonly kind: "Resolved"; readonly runAs: RunAs }
  | { readonly kind: "Invalid"; readonly message: string };

/**
 * The text of this machine's /etc/passwd and /etc/group. Only for what must enumerate them
 * (the uids a lease range must skip, uid-leases.ts); an account is looked up through NSS
 * (systemAccounts), where a site's LDAP and SSSD users are, and these files never name them.
 */
export interface IdentityDatabase {
  /** Lines of /etc/passwd and /etc/group, or null when unreadable. */
  readonly passwd: string | null;
  readonly group: string | null;
}

export function systemIdentityDatabase(): IdentityDatabase {
  const read = (path: string): string | null => {
    try {
      return readFileSync(path, "utf8");
    } catch {
      return null;
    }
  };
  return { passwd: read("/etc/passwd"), group: read("/etc/group") };
}

const NUMBER = /^\d{1,10}$/;
const NAME = /^[A-Za-z_][A-Za-z0-9_.-]{0,31}$/;

/** Field `index` of the database line whose first field is `name`, as a number. */
function lookup(text: string | null, name: string, index: number): number | null {
  if (text === null) return null;
  for (const line of text.split("\n")) {
    const fields = line.split(":");
    if (fields[0] !== name) continue;
    const value = fields[index];
    return value !== undefined && NUMBER.test(value) ? Number(value) : null;
  }
  return null;
}

function idOf(
  spelled: string,
  what: "user" | "group",
  accounts: AccountDatabase,
): number | { readonly error: string } {
  if (NUMBER.test(spelled)) return Number(spelled);
  if (!NAME.test(spelled)) return { error: `${JSON.stringify(spelled)} is not a ${what} name` };
  const id = what === "user" ? (accounts.account(spelled)?.uid ?? null) : accounts.groupId(spelled);
  if (id !== null) return id;
  // A minimal image may lack the entry; nobody/nogroup are 65534 by convention.
  if (spelled === "nobody" || spelled === "nogroup") return NOBODY_ID;
  return { error: `no ${what} named ${spelled} on this machine` };
}

export function resolveRunAs(spec: string, accounts: AccountDatabase): RunAsResolution {
  const invalid = (message: string): RunAsResolution => ({
    kind: "Invalid",
    message: `--run-as ${JSON.stringify(spec)}: ${message}`,
  });
  const [userPart, groupPart, extra] = spec.split(":");
  if (userPart === undefined || userPart === "" || extra !== undefined || groupPart === "") {
    return invalid("expected USER, UID, USER:GROUP or UID:GID");
  }
  const uid = idOf(userPart, "user", accounts);
  if (typeof uid !== "number") return invalid(uid.error);
  let gid: number | { readonly error: string };
  if (groupPart !== undefined) gid = idOf(groupPart, "group", accounts);
  else if (NUMBER.test(userPart)) gid = uid;
  else gid = accounts.account(userPart)?.gid ?? (userPart === "nobody" ? NOBODY_ID : uid);
  if (typeof gid !== "number") return invalid(gid.error);
  if (uid === 0) return invalid("resolves to uid 0: jobs must never run as root");
  if (gid === 0) return invalid("resolves to gid 0: jobs must never run in root's group");
  if (uid > 0xfffffffe || gid > 0xfffffffe) return invalid("id out of range");
  return { kind: "Resolved", runAs: { uid, gid, label: spec } };
}

export type RunAsChoice =
  | { readonly kind: "Chosen"; readonly runAs: RunAs | null }
  | { readonly kind: "Invalid"; readonly message: string };

/**
 * The identity for a daemon running as `daemonUid`: as root, `spec` (default nobody) and
 * never uid 0; otherwise null (the kernel lets no one else switch uid), and a spec naming
 * another uid is a mistake worth stopping for rather than a promise silently not kept.
 */
export function chooseRunAs(
  spec: string | undefined,
  daemonUid: number,
  accounts: AccountDatabase,
): RunAsChoice {
  const resolved = resolveRunAs(spec ?? DEFAULT_RUN_AS, accounts);
  if (resolved.kind === "Invalid") return resolved;
  if (daemonUid === 0) return { kind: "Chosen", runAs: resolved.runAs };
  if (spec === undefined || resolved.runAs.uid === daemonUid) {
    return { kind: "Chosen", runAs: null };
  }
  return {
    kind: "Invalid",
    message: `--run-as ${JSON.stringify(spec)}: only a daemon running as root can run jobs as another uid (this one runs as uid ${daemonUid}; its jobs keep that uid, sandboxed in a user namespace)`,
  };
}

/** Who jobs run as, as the admin chose it at start (built into JobIdentities by the composition). */
export type IdentityChoice =
  /** The daemon is not root: jobs keep its uid. */
  | { readonly kind: "DaemonUid" }
  /** `--run-as`: one account for every job. */
  | { readonly kind: "Fixed"; readonly runAs: RunAs }
  /** A root daemon's default: a uid per workload from `range`. */
  | { readonly kind: "Leased"; readonly range: UidRange };

export type IdentityChoiceResult =
  | { readonly kind: "Chosen"; readonly identity: IdentityChoice }
  | { readonly kind: "Invalid"; readonly message: string };

const RANGE = /^(\d{1,10})-(\d{1,10})$/;

/** `FIRST-LAST`, inclusive; never uid 0, at least 2 uids, within 32 bits. */
export function parseUidRange(spec: string): UidRange | { readonly error: string } {
  const m = RANGE.exec(spec);
  const invalid = (why: string) => ({ error: `--uid-range ${JSON.stringify(spec)}: ${why}` });
  if (m === null) return invalid("expected FIRST-LAST, e.g. 61184-65519");
  const first = Number(m[1]);
  const last = Number(m[2]);
  if (first === 0) return invalid("must not include uid 0: jobs must never run as root");
  if (last > 0xfffffffe) return invalid("uids end at 4294967294");
  if (last <= first) return invalid("LAST must be above FIRST");
  return { first, last };
}

/**
 * Who jobs of a daemon running as `daemonUid` run as. Root: one named account when
 * `runAsSpec` is given, else a leased uid per workload from `uidRangeSpec` (default
 * DEFAULT_UID_RANGE); both at once is a contradiction worth stopping for. Not root: its own
 * uid (chooseRunAs says why another is refused), and a range is refused likewise.
 */
export function chooseJobIdentity(
  runAsSpec: string | undefined,
  uidRangeSpec: string | undefined,
  daemonUid: number,
  accounts: AccountDatabase,
): IdentityChoiceResult {
  if (runAsSpec !== undefined && uidRangeSpec !== undefined) {
    return {
      kind: "Invalid",
      message:
        "--run-as and --uid-range both given: choose one account for every job (--run-as) or a uid per workload (--uid-range)",
    };
  }
  if (uidRangeSpec !== undefined) {
    if (daemonUid !== 0) {
      return {
        kind: "Invalid",
        message: `--uid-range ${JSON.stringify(uidRangeSpec)}: only a daemon running as root can run jobs as other uids (this one runs as uid ${daemonUid})`,
      };
    }
    const range = parseUidRange(uidRangeSpec);
    if ("error" in range) return { kind: "Invalid", message: range.error };
    return { kind: "Chosen", identity: { kind: "Leased", range } };
  }
  const chosen = chooseRunAs(runAsSpec, daemonUid, accounts);
  if (chosen.kind === "Invalid") return chosen;
  if (chosen.runAs === null) return { kind: "Chosen", identity: { kind: "DaemonUid" } };
  if (runAsSpec === undefined) {
    return { kind: "Chosen", identity: { kind: "Leased", range: DEFAULT_UID_RANGE } };
  }
  return { kind: "Chosen", identity: { kind: "Fixed", runAs: chosen.runAs } };
}

/** Below this, a uid is a system account (the core rule's floor, accounts.ts). */
export const DEFAULT_MIN_OWNER_UID = DEFAULT_MIN_ACCOUNT_UID;
export const MIN_OWNER_UID_ENV = "OPENAI4S_MIN_OWNER_UID";

/** The gids of the groups of `group` that list `user` as a member (its fourth field). */
function memberGids(group: string | null, user: string): number[] {
  const gids: number[] = [];
  for (const line of (group ?? "").split("\n")) {
    const fields = line.split(":");
    const gid = fields[2];
    if (gid === undefined || !NUMBER.test(gid)) continue;
    if ((fields[3] ?? "").split(",").includes(user)) gids.push(Number(gid));
  }
  return gids;
}

/**
 * The AccountDatabase port over the text of a password and a group database (their file
 * format): an account's uid, primary gid and supplementary groups (the groups whose member
 * list names it). For what is given such text; the daemon asks NSS (systemAccounts).
 */
export function identityDatabaseAccounts(db: IdentityDatabase): AccountDatabase {
  return {
    account(name) {
      if (!NAME.test(name)) return null;
      const uid = lookup(db.passwd, name, 2);
      const gid = lookup(db.passwd, name, 3);
      if (uid === null || gid === null) return null;
      const groups = [...new Set([gid, ...memberGids(db.group, name)])].sort((a, b) => a - b);
      return { name, uid, gid, groups };
    },
    nameOfUid(uid) {
      for (const line of (db.passwd ?? "").split("\n")) {
        const fields = line.split(":");
        if (fields[2] === String(uid) && fields[0] !== undefined && fields[0] !== "") {
          return fields[0];
        }
      }
      return null;
    },
    groupId: (name) => (NAME.test(name) ? lookup(db.group, name, 2) : null),
  };
}

/**
 * The account a principal's jobs run as on a `run_as = "owner"` profile: `user`'s uid,
 * primary gid and supplementary groups, if the core rule (checkAccount) lets work run as it.
 */
export function ownerAccount(
  user: string,
  accounts: AccountLookup,
  minUid: number,
): RunAsResolution {
  const checked = checkAccount(user, accounts, minUid);
  if (checked.kind === "Unusable") return { kind: "Invalid", message: checked.message };
  const { uid, gid, groups } = checked.account;
  return { kind: "Resolved", runAs: { uid, gid, groups, label: `${user} (owner)`, account: user } };
}

/** `OPENAI4S_MIN_OWNER_UID`: whole number from 1; default DEFAULT_MIN_OWNER_UID. */
export function parseMinOwnerUid(raw: string | undefined): number | { readonly error: string } {
  if (raw === undefined || raw === "") return DEFAULT_MIN_OWNER_UID;
  const n = /^\d{1,10}$/.test(raw) ? Number(raw) : Number.NaN;
  if (n >= 1 && n <= 0xfffffffe) return n;
  return {
    error: `${MIN_OWNER_UID_ENV}=${JSON.stringify(raw)}: expected a whole number from 1 (uid 0 is never a job's)`,
  };
}

/**
 * Running work as its owner needs a root daemon (no one else may switch uid): a profile that
 * asks for it under any other daemon stops the start, naming the profile, rather than
 * running the scientists' jobs as the service account they were promised they would not.
 */
export function ownerModeRefusal(
  ownerProfiles: ReadonlySet<string>,
  choice: IdentityChoice,
): string | null {
  if (ownerProfiles.size === 0 || choice.kind !== "DaemonUid") return null;
  const names = [...ownerProfiles].map((p) => JSON.stringify(p)).join(", ");
  return `profile ${names} runs work as its owner (run_as = "owner"), which needs the daemon to run as root (only root may start work as another uid)`;
}
