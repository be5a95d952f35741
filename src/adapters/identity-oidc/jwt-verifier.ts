/**
 * A JWT from the site's issuer, verified with jose: signature by one of the issuer's keys,
 * `iss`, `aud`, `exp` (required) and `nbf`, against the daemon's clock. Only asymmetric
 * algorithms are accepted: `alg: none` and an HMAC "signed" with the issuer's public key
 * (the classic confusion) are refused before any key is looked at.
 */
import { errors, type JWTVerifyGetKey, jwtVerify } from "jose";
import type { IdentityVerdict, JwtVerifier } from "../../core/ports/site-identity.ts";
import type { Clock } from "../../lib/clock.ts";
import { issuerKeys } from "./key-source.ts";
import type { OidcSettings } from "./oidc-settings.ts";

const ASYMMETRIC = [
  "RS256",
  "RS384",
  "RS512",
  "PS256",
  "PS384",
  "PS512",
  "ES256",
  "ES384",
  "ES512",
  "EdDSA",
  "Ed25519",
];

/** Clocks differ a little between the issuer and this daemon. */
const CLOCK_TOLERANCE_SECONDS = 30;

/** A unix account name as the password database spells one. */
const ACCOUNT = /^[a-z_][a-z0-9_.-]{0,31}$/;

function refused(message: string): IdentityVerdict {
  return { kind: "Refused", message };
}

/** jose's error as a sentence the caller can act on; never the token. */
function reasonOf(error: unknown): string {
  if (error instanceof errors.JWTExpired) return "the token has expired";
  if (error instanceof errors.JWTClaimValidationFailed) {
    return `the token's ${error.claim} claim is not accepted (${error.reason})`;
  }
  if (error instanceof errors.JOSEAlgNotAllowed) return "the token's algorithm is not accepted";
  if (error instanceof errors.JWKSNoMatchingKey) return "no key of the issuer matches the token";
  if (error instanceof errors.JWSSignatureVerificationFailed) return "the signature is not valid";
  if (error instanceof errors.JOSEError) return `the token is not valid (${error.code})`;
  return "the issuer's keys are unavailable";
}

export function createJwtVerifier(
  settings: OidcSettings,
  clock: Clock,
  keys: JWTVerifyGetKey = issuerKeys(settings, () => clock.now()),
): JwtVerifier {
  return {
    async verify(token) {
      let payload: Record<string, unknown>;
      try {
        ({ payload } = await jwtVerify(token, keys, {
          issuer: settings.issuer,
          audience: settings.audience,
          algorithms: ASYMMETRIC,
          requiredClaims: ["exp"],
          clockTolerance: CLOCK_TOLERANCE_SECONDS,
          currentDate: new Date(clock.now()),
        }));
      } catch (error) {
        return refused(`site sign-in refused: ${reasonOf(error)}`);
      }
      const account = payload[settings.userClaim];
      if (typeof account !== "string" || !ACCOUNT.test(account)) {
        return refused(
          `site sign-in refused: the token's ${settings.userClaim} claim does not name a unix account`,
        );
      }
      const sub = typeof payload.sub === "string" ? payload.sub.slice(0, 200) : account;
      return { kind: "Proved", account, uid: null, via: `oidc:${sub}` };
    },
  };
}
