/**
 * A MUNGE credential, verified by the site's `munged` through `unmunge` (issue 32): it
 * proves the uid of whoever made it. `munged` itself refuses a credential decoded twice on
 * this node (replayed), past its TTL (expired), or from another realm's key; the payload
 * must bind it to this request and this daemon (munge-payload.ts). The uid is named through
 * the system's account database (`getent`, so LDAP and SSSD accounts are found too).
 */
import type {
  IdentityVerdict,
  MungeBinding,
  MungeVerifier,
} from "../../core/ports/site-identity.ts";
import { payloadMismatch } from "./munge-payload.ts";

export interface MungeSettings {
  /** munged's socket; null: the site's default (`/run/munge/munge.socket.2`). */
  readonly socket: string | null;
  /** Where `unmunge` and `getent` are found. */
  readonly path: string;
}

const TIMEOUT_MS = 5_000;
/** A credential from `munge -s` with a payload of a few hundred bytes is well under this. */
const MAX_CREDENTIAL_CHARS = 4096;
const CREDENTIAL = /^MUNGE:[A-Za-z0-9+/=]+:$/;

interface Ran {
  readonly exitCode: number | null;
  readonly stdout: string;
}

async function run(argv: readonly string[], path: string, stdin: string | null): Promise<Ran> {
  const child = Bun.spawn([...argv], {
    env: { PATH: path },
    stdin: stdin === null ? "ignore" : new TextEncoder().encode(stdin),
    stdout: "pipe",
    stderr: "ignore",
    timeout: TIMEOUT_MS,
    killSignal: "SIGKILL",
  });
  const stdout = await new Response(child.stdout).text();
  return { exitCode: await child.exited, stdout: stdout.slice(0, 64 * 1024) };
}

/** unmunge -N's header lines (`KEY: value`) up to the blank line, and the payload after it. */
function parseUnmunge(text: string): { fields: Map<string, string>; payload: string } {
  const blank = text.indexOf("\n\n");
  const head = blank < 0 ? text : text.slice(0, blank);
  const fields = new Map<string, string>();
  for (const line of head.split("\n")) {
    const colon = line.indexOf(":");
    if (colon > 0) fields.set(line.slice(0, colon).trim(), line.slice(colon + 1).trim());
  }
  return { fields, payload: blank < 0 ? "" : text.slice(blank + 2) };
}

/** MUNGE's status codes the caller can act on (munge.h, munge_err_t). */
const STATUS_WORDS: Readonly<Record<string, string>> = {
  "15": "the credential has expired",
  "16": "the credential was rewound (made in the future)",
  "17": "the credential was already used (replayed)",
  "8": "the credential is not valid",
  "9": "the credential is not valid",
  "10": "the credential is not valid",
  "11": "the credential was not made with this site's key",
  "12": "the credential is not valid",
  "13": "the credential is not valid",
  "14": "the credential is not valid",
  "18": "the credential may not be decoded by this daemon",
};

function refused(message: string): IdentityVerdict {
  return { kind: "Refused", message: `MUNGE sign-in refused: ${message}` };
}

export function createMungeVerifier(settings: MungeSettings): MungeVerifier {
  const socketArgs = settings.socket === null ? [] : ["-S", settings.socket];
  return {
    async verify(credential: string, binding: MungeBinding): Promise<IdentityVerdict> {
      if (credential.length > MAX_CREDENTIAL_CHARS || !CREDENTIAL.test(credential)) {
        return refused("that is not a MUNGE credential");
      }
      let decoded: Ran;
      try {
        decoded = await run(["unmunge", "-N", ...socketArgs], settings.path, credential);
      } catch (error) {
        return refused(`unmunge could not be run (${String(error)})`);
      }
      const { fields, payload } = parseUnmunge(decoded.stdout);
      const status = fields.get("STATUS");
      if (decoded.exitCode !== 0 || status !== "0") {
        const words = status === undefined ? undefined : STATUS_WORDS[status];
        return refused(words ?? `munged refused it (status ${status ?? decoded.exitCode})`);
      }
      const uidText = fields.get("UID") ?? "";
      if (!/^\d{1,10}$/.test(uidText)) return refused("munged named no uid");
      const mismatch = payloadMismatch(payload, binding);
      if (mismatch !== null) return refused(mismatch);
      const uid = Number(uidText);
      const account = await accountOf(uid, settings.path);
      if (account === null) return refused(`uid ${uid} has no account on this machine`);
      return { kind: "Proved", account, uid, via: `munge:${uid}` };
    },
  };
}

/** The account name of `uid` from the system's databases, or null. */
async function accountOf(uid: number, path: string): Promise<string | null> {
  try {
    const found = await run(["getent", "passwd", String(uid)], path, null);
    if (found.exitCode !== 0) return null;
    const fields = found.stdout.split("\n")[0]?.split(":") ?? [];
    return fields[2] === String(uid) && fields[0] ? fields[0] : null;
  } catch {
    return null;
  }
}
