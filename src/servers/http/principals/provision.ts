/**
 * The principal a site-proved unix account is (issue 32): the one the admin mapped to that
 * account, else, where the site allows, one created now under the account's name with the
 * daemon's default limits. Every principal made on first use is made here, so the checks on
 * which accounts may be principals (`accountRefusal`: root, system accounts, missing
 * accounts) apply to it exactly as to `principal add`.
 */
import {
  addPrincipal,
  principalByUnixUser,
  type StoreDeps,
} from "../../../adapters/store-sqlite/index.ts";
import {
  NO_LIMITS,
  PRINCIPAL_NAME_PATTERN,
  type PrincipalLimits,
} from "../../../core/principals.ts";

export type Provisioned =
  | { readonly kind: "Principal"; readonly name: string; readonly created: boolean }
  /** 403: proved, but not a principal (and not made one); the message names the fix. */
  | { readonly kind: "Refused"; readonly message: string };

export interface ProvisionDeps {
  readonly store: StoreDeps;
  readonly defaults: PrincipalLimits | undefined;
  /** Why the account may not be a principal, or null (the site's account checks). */
  readonly accountRefusal: (account: string) => string | null;
}

export function principalForAccount(
  deps: ProvisionDeps,
  account: string,
  uid: number | null,
  create: boolean,
): Provisioned {
  // Root is never a principal, whatever the account database says (a credential may carry
  // uid 0 under another name: `toor`).
  if (uid === 0 || account === "root") {
    return { kind: "Refused", message: `unix user ${JSON.stringify(account)} is root` };
  }
  const mapped = principalByUnixUser(deps.store, account);
  if (mapped !== null) return { kind: "Principal", name: mapped, created: false };
  if (!create) {
    return {
      kind: "Refused",
      message: `unix user ${JSON.stringify(account)} is no principal here; the admin adds one: openai4s principal add NAME --unix-user ${account}`,
    };
  }
  if (!PRINCIPAL_NAME_PATTERN.test(account)) {
    return {
      kind: "Refused",
      message: `unix user ${JSON.stringify(account)} cannot name a principal (lower case letters, digits, _ . -)`,
    };
  }
  const refusal = deps.accountRefusal(account);
  if (refusal !== null) return { kind: "Refused", message: refusal };
  const limits = deps.defaults ?? NO_LIMITS;
  const added = addPrincipal(deps.store, { name: account, unixUser: account, ...limits });
  if (added.kind === "Added") return { kind: "Principal", name: account, created: true };
  // Another request created it a moment ago: its principal, if that maps this account.
  const raced = principalByUnixUser(deps.store, account);
  if (raced !== null) return { kind: "Principal", name: raced, created: false };
  return {
    kind: "Refused",
    message: `a principal named ${JSON.stringify(account)} exists but is not mapped to unix user ${account}; the admin maps or renames it`,
  };
}
