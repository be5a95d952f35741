/**
 * The site's accounts as NSS answers for them (issue 32), through `getent`: at an HPC site
 * the scientists live in LDAP or SSSD, not in /etc/passwd, and reading that file refused
 * them (`principal add sci --unix-user alice`: "no such account", their first MUNGE sign-in,
 * their jobs on a `run_as = "owner"` profile). `getent` asks every source nsswitch.conf
 * names, as `id` and the scheduler do.
 *
 * Synchronous on purpose: the AccountDatabase port is, and its callers (a launch's claim)
 * are. Each call is bounded (a timeout, an output cap) and answers are cached for a short
 * time, so a burst of launches asks NSS once per account, not once per launch; a slow or
 * broken NSS (getent timed out, missing, or an answer that does not parse) is thrown as
 * broken infrastructure, never mistaken for "no such account".
 */
import type { AccountDatabase, UnixAccount } from "../../core/accounts.ts";
import type { Clock } from "../../lib/clock.ts";

export interface GetentSettings {
  /** The `getent` program: a bare name looked up on `path`, or an absolute path. */
  readonly getent: string;
  /** The PATH `getent` is found on and runs with. */
  readonly path: string;
  /** Per call; past it the call is killed and thrown as NSS being down. */
  readonly timeoutMs: number;
  /** How long an answer (found or not) is reused. 0: every call asks. */
  readonly cacheTtlMs: number;
  /** Milliseconds, for the cache (injected: tests move it). */
  readonly now: () => number;
}

export const DEFAULT_GETENT_SETTINGS: Omit<GetentSettings, "now"> = {
  getent: "getent",
  path: "/usr/local/bin:/usr/bin:/bin",
  timeoutMs: 5_000,
  // Short: an account made, deleted or given a group while the daemon runs is seen soon.
  cacheTtlMs: 5_000,
};

/** One passwd or group entry is a few hundred bytes; a group with thousands of members more. */
const MAX_OUTPUT_BYTES = 1024 * 1024;
/** Entries kept at most: names come from requests, so the cache must not grow without bound. */
const MAX_CACHED = 4096;
const NAME = /^[A-Za-z_][A-Za-z0-9_.-]{0,31}$/;
const ID = /^\d{1,10}$/;
const MAX_ID = 0xfffffffe;

/** getent's exit status for "no such key" (getent(1)). */
const NOT_FOUND_EXIT = 2;

export class NssLookupError extends Error {
  override readonly name = "NssLookupError";
}

function idOf(text: string | undefined): number | null {
  if (text === undefined || !ID.test(text)) return null;
  const n = Number(text);
  return n <= MAX_ID ? n : null;
}

/** The one line getent printed (a trailing newline allowed), or a throw: it said more. */
function oneLine(out: string, what: string): string {
  const text = out.endsWith("\n") ? out.slice(0, -1) : out;
  if (text === "" || text.includes("\n")) {
    throw new NssLookupError(
      `getent ${what}: expected one entry, got ${JSON.stringify(out.slice(0, 200))}`,
    );
  }
  return text;
}

interface PasswdEntry {
  readonly name: string;
  readonly uid: number;
  readonly gid: number;
}

/** `name:password:uid:gid:gecos:home:shell`, strictly: seven fields, a valid name and ids. */
export function parsePasswdLine(line: string): PasswdEntry | null {
  const fields = line.split(":");
  if (fields.length !== 7) return null;
  const [name, , uidText, gidText] = fields;
  const uid = idOf(uidText);
  const gid = idOf(gidText);
  if (name === undefined || !NAME.test(name) || uid === null || gid === null) return null;
  return { name, uid, gid };
}

/** `name:password:gid:members`, strictly. */
export function parseGroupLine(line: string): { name: string; gid: number } | null {
  const fields = line.split(":");
  if (fields.length !== 4) return null;
  const [name, , gidText] = fields;
  const gid = idOf(gidText);
  if (name === undefined || !NAME.test(name) || gid === null) return null;
  return { name, gid };
}

/** `name  gid gid ...` (getent initgroups): the groups NSS puts `name` in. */
export function parseInitgroupsLine(line: string, name: string): number[] | null {
  const [first, ...rest] = line.trim().split(/\s+/);
  if (first !== name) return null;
  const gids: number[] = [];
  for (const token of rest) {
    const gid = idOf(token);
    if (gid === null) return null;
    gids.push(gid);
  }
  return gids;
}

export function getentAccounts(settings: GetentSettings): AccountDatabase {
  const cache = new Map<string, { readonly at: number; readonly value: unknown }>();

  function cached<T>(key: string, ask: () => T): T {
    const now = settings.now();
    const hit = cache.get(key);
    if (hit !== undefined && now - hit.at < settings.cacheTtlMs) return hit.value as T;
    cache.delete(key);
    const value = ask();
    if (settings.cacheTtlMs > 0) {
      // The oldest entry goes first (a Map keeps insertion order).
      if (cache.size >= MAX_CACHED) {
        const oldest = cache.keys().next().value;
        if (oldest !== undefined) cache.delete(oldest);
      }
      cache.set(key, { at: now, value });
    }
    return value;
  }

  /** getent's one line for `key` in `database`, or null when NSS has no such entry. */
  function getent(database: string, key: string): string | null {
    const what = `${database} ${key}`;
    const program = settings.getent.startsWith("/")
      ? settings.getent
      : Bun.which(settings.getent, { PATH: settings.path });
    if (program === null) throw new NssLookupError(`getent ${what}: no getent on ${settings.path}`);
    let done: ReturnType<typeof Bun.spawnSync>;
    try {
      done = Bun.spawnSync({
        cmd: [program, database, key],
        env: { PATH: settings.path },
        stdin: "ignore",
        stdout: "pipe",
        stderr: "pipe",
        timeout: settings.timeoutMs,
        killSignal: "SIGKILL",
        maxBuffer: MAX_OUTPUT_BYTES,
      });
    } catch (error) {
      throw new NssLookupError(`getent ${what}: could not run (${String(error)})`);
    }
    if (done.exitedDueToTimeout === true) {
      throw new NssLookupError(`getent ${what}: no answer within ${settings.timeoutMs} ms`);
    }
    if (done.exitCode === NOT_FOUND_EXIT) return null;
    const out = done.stdout?.toString() ?? "";
    if (done.exitCode !== 0 || out.length >= MAX_OUTPUT_BYTES) {
      const err = (done.stderr?.toString() ?? "").slice(0, 200).trim();
      throw new NssLookupError(
        `getent ${what}: exited ${done.exitCode ?? done.signalCode}${err === "" ? "" : `: ${err}`}`,
      );
    }
    return oneLine(out, what);
  }

  function passwd(key: string): PasswdEntry | null {
    const line = getent("passwd", key);
    if (line === null) return null;
    const entry = parsePasswdLine(line);
    if (entry === null) throw new NssLookupError(`getent passwd ${key}: unreadable entry`);
    return entry;
  }

  function account(name: string): UnixAccount | null {
    // Never a key getent would read as a uid or an option: only a user name goes on its line.
    if (!NAME.test(name)) return null;
    const entry = passwd(name);
    if (entry === null) return null;
    // A case-insensitive source (SSSD's default for AD) answers "Alice" with alice: that is
    // not the account asked for, and a principal is one exact account.
    if (entry.name !== name) return null;
    const line = getent("initgroups", name);
    const groups = line === null ? [] : parseInitgroupsLine(line, name);
    if (groups === null) throw new NssLookupError(`getent initgroups ${name}: unreadable answer`);
    const all = [...new Set([entry.gid, ...groups])].sort((a, b) => a - b);
    return { name, uid: entry.uid, gid: entry.gid, groups: all };
  }

  return {
    account: (name) => cached(`account:${name}`, () => account(name)),
    nameOfUid: (uid) =>
      cached(`uid:${uid}`, () => {
        if (!Number.isInteger(uid) || uid < 0 || uid > MAX_ID) return null;
        const entry = passwd(String(uid));
        if (entry === null) return null;
        if (entry.uid !== uid)
          throw new NssLookupError(`getent passwd ${uid}: answered for uid ${entry.uid}`);
        return entry.name;
      }),
    groupId: (name) =>
      cached(`group:${name}`, () => {
        if (!NAME.test(name)) return null;
        const line = getent("group", name);
        if (line === null) return null;
        const entry = parseGroupLine(line);
        if (entry === null || entry.name !== name) {
          throw new NssLookupError(`getent group ${name}: unreadable entry`);
        }
        return entry.gid;
      }),
  };
}

/** The site's accounts as NSS answers (getent), cached briefly on `clock` unless asked not to. */
export function systemAccounts(
  clock: Clock,
  options: { readonly cached: boolean } = { cached: true },
): AccountDatabase {
  return getentAccounts({
    ...DEFAULT_GETENT_SETTINGS,
    ...(options.cached ? {} : { cacheTtlMs: 0 }),
    now: () => clock.now(),
  });
}
