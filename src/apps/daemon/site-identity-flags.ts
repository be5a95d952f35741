/**
 * `serve`'s flags for sign-in through the site (issue 32): the OIDC issuer
 * (`--oidc-issuer`, `--oidc-audience`, `--oidc-user-claim`, `--oidc-jwks-file`,
 * `--oidc-jwks-uri`, or `$OPENAI4S_OIDC_*` from a unit's EnvironmentFile), MUNGE
 * (`--munge`, `--munge-socket`, `--munge-create-principals`) and the users' socket
 * (`--users-socket`). Every problem is a UsageError naming its flag.
 */
import { resolve } from "node:path";
import {
  DEFAULT_USER_CLAIM,
  type OidcSettings,
} from "../../adapters/identity-oidc/oidc-settings.ts";
import { UsageError } from "../../lib/command/command.ts";

export interface SiteIdentityOptions {
  /** Null: no issuer; JWTs are not accepted. */
  readonly oidc: OidcSettings | null;
  /** Null: MUNGE credentials are not accepted. */
  readonly munge: { readonly socket: string | null; readonly createPrincipals: boolean } | null;
  /** A socket every local user may open, where callers prove themselves; null: none. */
  readonly usersSocket: string | null;
}

export const SITE_IDENTITY_FLAGS = {
  "oidc-issuer": { type: "string" },
  "oidc-audience": { type: "string" },
  "oidc-user-claim": { type: "string" },
  "oidc-jwks-file": { type: "string" },
  "oidc-jwks-uri": { type: "string" },
  munge: { type: "boolean" },
  "munge-socket": { type: "string" },
  "munge-create-principals": { type: "boolean" },
  "users-socket": { type: "string" },
} as const;

type Values = Partial<Record<keyof typeof SITE_IDENTITY_FLAGS, string | boolean | undefined>>;

const LOOPBACK_HTTP = /^http:\/\/(127\.\d+\.\d+\.\d+|\[::1\]|localhost)(:\d+)?(\/|$)/;
const CLAIM = /^[A-Za-z_][A-Za-z0-9_:.-]{0,63}$/;

function text(v: Values, env: Readonly<Record<string, string | undefined>>, flag: string) {
  const given = v[flag as keyof Values];
  if (typeof given === "string") return given;
  const fromEnv = env[`OPENAI4S_${flag.toUpperCase().replaceAll("-", "_")}`];
  return fromEnv === undefined || fromEnv === "" ? undefined : fromEnv;
}

/** A URL keys or tokens are trusted from: https, or http on loopback only (tests, a proxy). */
function trustedUrl(flag: string, raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new UsageError(`serve: --${flag} "${raw}" is not a URL`);
  }
  if (url.protocol !== "https:" && !LOOPBACK_HTTP.test(raw)) {
    throw new UsageError(
      `serve: --${flag} "${raw}" must be https (plain http only on loopback): keys fetched in the clear can be swapped`,
    );
  }
  return raw;
}

function parseOidc(
  v: Values,
  env: Readonly<Record<string, string | undefined>>,
  cwd: string,
): OidcSettings | null {
  const issuer = text(v, env, "oidc-issuer");
  const rest = ["oidc-audience", "oidc-user-claim", "oidc-jwks-file", "oidc-jwks-uri"];
  if (issuer === undefined) {
    const stray = rest.find((f) => text(v, env, f) !== undefined);
    if (stray !== undefined) throw new UsageError(`serve: --${stray} needs --oidc-issuer`);
    return null;
  }
  const audience = text(v, env, "oidc-audience");
  if (audience === undefined) {
    throw new UsageError(
      "serve: --oidc-issuer needs --oidc-audience (the client id the site registered for openai4s): a token minted for another application must not sign in here",
    );
  }
  const userClaim = text(v, env, "oidc-user-claim") ?? DEFAULT_USER_CLAIM;
  if (!CLAIM.test(userClaim))
    throw new UsageError(`serve: --oidc-user-claim "${userClaim}" is not a claim name`);
  const file = text(v, env, "oidc-jwks-file");
  const uri = text(v, env, "oidc-jwks-uri");
  if (file !== undefined && uri !== undefined) {
    throw new UsageError("serve: give --oidc-jwks-file or --oidc-jwks-uri, not both");
  }
  return {
    issuer: trustedUrl("oidc-issuer", issuer),
    audience,
    userClaim,
    jwksFile: file === undefined ? null : resolve(cwd, file),
    jwksUri: uri === undefined ? null : trustedUrl("oidc-jwks-uri", uri),
  };
}

export function parseSiteIdentity(
  v: Values,
  env: Readonly<Record<string, string | undefined>>,
  cwd: string,
): SiteIdentityOptions {
  const mungeOn = v.munge === true;
  const socket = typeof v["munge-socket"] === "string" ? v["munge-socket"] : undefined;
  if (!mungeOn && (socket !== undefined || v["munge-create-principals"] === true)) {
    throw new UsageError(
      `serve: --${socket !== undefined ? "munge-socket" : "munge-create-principals"} needs --munge`,
    );
  }
  const users = typeof v["users-socket"] === "string" ? v["users-socket"] : undefined;
  if (users === "") throw new UsageError("serve: --users-socket needs a path");
  return {
    oidc: parseOidc(v, env, cwd),
    munge: mungeOn
      ? {
          socket: socket === undefined ? null : resolve(cwd, socket),
          createPrincipals: v["munge-create-principals"] === true,
        }
      : null,
    usersSocket: users === undefined ? null : resolve(cwd, users),
  };
}
