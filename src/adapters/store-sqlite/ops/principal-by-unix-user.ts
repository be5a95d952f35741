/** The principal mapped to a unix account (site sign-in: the account a credential proved). */
import type { StoreDeps } from "../deps.ts";

export function principalByUnixUser(deps: StoreDeps, unixUser: string): string | null {
  const row = deps.db.$client
    .query<{ name: string }, [string]>("SELECT name FROM principals WHERE unix_user = ?")
    .get(unixUser);
  return row === null ? null : row.name;
}
