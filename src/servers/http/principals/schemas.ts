/** Request and response shapes of the admin's principal and token routes. */
import * as v from "valibot";
import { PRINCIPAL_NAME_PATTERN } from "../../../core/principals.ts";

const d = v.description;

const limit = (what: string) =>
  v.optional(
    v.pipe(
      v.nullable(v.pipe(v.number(), v.integer(), v.minValue(0), v.maxValue(1_000_000))),
      d(`${what}; null: unlimited; absent: the daemon's default for new principals.`),
    ),
  );

export const PrincipalBody = v.strictObject({
  name: v.pipe(
    v.string(),
    v.regex(PRINCIPAL_NAME_PATTERN, "must be 1 to 32 of a-z 0-9 _ . - starting with a letter or _"),
    d("The principal's name (what `--owner` and listings say)."),
  ),
  unixUser: v.optional(
    v.pipe(
      v.nullable(
        v.pipe(v.string(), v.regex(/^[a-z_][a-z0-9_-]{0,31}\$?$/, "not a unix user name")),
      ),
      d("The unix account this principal is, if any."),
    ),
  ),
  maxSessions: limit("Live SESSIONs at once"),
  maxBatch: limit("Live BATCH workloads at once"),
  maxCpus: limit("CPUs held by live workloads"),
  maxGpus: limit("GPUs held by live workloads"),
});

const nullableCount = (what: string) =>
  v.pipe(v.nullable(v.pipe(v.number(), v.integer())), d(`${what}; null: unlimited.`));

export const PrincipalSchema = v.strictObject({
  name: v.pipe(v.string(), d("The principal's name.")),
  unixUser: v.pipe(v.nullable(v.string()), d("Its unix account, or null.")),
  maxSessions: nullableCount("Live SESSIONs at once"),
  maxBatch: nullableCount("Live BATCH workloads at once"),
  maxCpus: nullableCount("CPUs held by live workloads"),
  maxGpus: nullableCount("GPUs held by live workloads"),
  createdAt: v.pipe(v.string(), v.isoTimestamp(), d("When it was added.")),
});

export const PrincipalListSchema = v.strictObject({
  items: v.pipe(v.array(PrincipalSchema), d("Every principal, by name.")),
});

export const TokenBody = v.strictObject({
  expiresInSeconds: v.optional(
    v.pipe(
      v.number(),
      v.integer(),
      v.minValue(1),
      v.maxValue(10 * 365 * 86_400),
      d("Seconds until the token stops working; absent: it never expires."),
    ),
  ),
});

export const IssuedTokenSchema = v.strictObject({
  id: v.pipe(v.string(), d("The token's id: what `token revoke` takes and logs show.")),
  principal: v.pipe(v.string(), d("Whose token it is.")),
  token: v.pipe(v.string(), d("The bearer token. Shown this once; only its hash is stored.")),
  expiresAt: v.pipe(v.nullable(v.string()), d("When it stops working, or null.")),
});

export const RevokedTokenSchema = v.strictObject({
  id: v.pipe(v.string(), d("The token's id.")),
  revoked: v.pipe(v.boolean(), d("Always true: revoking twice is not an error.")),
});
