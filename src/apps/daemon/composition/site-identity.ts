/**
 * Sign-in through the site, wired (issue 32): the OIDC verifier over the issuer's keys, the
 * MUNGE verifier over the site's munged, and the account checks a principal made on first
 * sign-in must pass (ownerAccount: no root, no system account below the uid floor, no
 * missing account, the same rule as running work as its owner).
 */

import { systemAccounts } from "../../../adapters/accounts-nss/getent-accounts.ts";
import { createMungeVerifier } from "../../../adapters/identity-munge/munge-verifier.ts";
import { createJwtVerifier } from "../../../adapters/identity-oidc/jwt-verifier.ts";
import {
  MIN_OWNER_UID_ENV,
  ownerAccount,
  parseMinOwnerUid,
} from "../../../adapters/isolation-bwrap/run-as.ts";
import type { SiteIdentity } from "../../../core/ports/site-identity.ts";
import type { Clock } from "../../../lib/clock.ts";
import type { SiteIdentityOptions } from "../site-identity-flags.ts";

const DEFAULT_TOOL_PATH = "/usr/local/bin:/usr/bin:/bin";

export function composeSiteIdentity(
  options: SiteIdentityOptions | undefined,
  env: Readonly<Record<string, string | undefined>>,
  clock: Clock,
): SiteIdentity | { readonly error: string } | null {
  if (options === undefined || (options.oidc === null && options.munge === null)) return null;
  const minUid = parseMinOwnerUid(env[MIN_OWNER_UID_ENV]);
  if (typeof minUid !== "number") return { error: minUid.error };
  const accounts = systemAccounts(clock);
  return {
    oidc: options.oidc === null ? null : createJwtVerifier(options.oidc, clock),
    munge:
      options.munge === null
        ? null
        : createMungeVerifier({
            socket: options.munge.socket,
            path: env.PATH ?? DEFAULT_TOOL_PATH,
          }),
    mungeCreatesPrincipals: options.munge?.createPrincipals ?? false,
    daemonUid: process.getuid?.() ?? -1,
    accountRefusal(account) {
      // Asked through NSS (an LDAP or SSSD user is no line of /etc/passwd), cached for
      // seconds only: an account made after start is found.
      const checked = ownerAccount(account, accounts, minUid);
      return checked.kind === "Invalid" ? checked.message : null;
    },
  };
}
