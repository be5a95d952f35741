/**
 * The profile breaker's settings from the daemon's environment (README lists them): how many
 * refusals in a row degrade a profile, and the first back-off before one is tried again.
 */
import {
  DEFAULT_PROFILE_BREAKER,
  type ProfileBreakerOptions,
} from "../../../core/reconciler/profile-breaker.ts";

export const PROFILE_BREAKER_THRESHOLD_ENV = "OPENAI4S_PROFILE_BREAKER_THRESHOLD";
export const PROFILE_BREAKER_BACKOFF_ENV = "OPENAI4S_PROFILE_BREAKER_BACKOFF_SECONDS";

export function profileBreakerFromEnv(
  env: Readonly<Record<string, string | undefined>>,
):
  | { readonly kind: "Breaker"; readonly options: ProfileBreakerOptions }
  | { readonly kind: "ConfigError"; readonly message: string } {
  const threshold = wholeNumber(
    env[PROFILE_BREAKER_THRESHOLD_ENV],
    DEFAULT_PROFILE_BREAKER.threshold,
  );
  if (threshold === null || threshold < 1 || threshold > 1000) {
    return {
      kind: "ConfigError",
      message: `${PROFILE_BREAKER_THRESHOLD_ENV} must be a whole number of refusals in 1..1000`,
    };
  }
  const backoffSeconds = wholeNumber(
    env[PROFILE_BREAKER_BACKOFF_ENV],
    DEFAULT_PROFILE_BREAKER.initialBackoffMs / 1000,
  );
  if (backoffSeconds === null || backoffSeconds < 1 || backoffSeconds > 86_400) {
    return {
      kind: "ConfigError",
      message: `${PROFILE_BREAKER_BACKOFF_ENV} must be a whole number of seconds in 1..86400`,
    };
  }
  const initialBackoffMs = backoffSeconds * 1000;
  return {
    kind: "Breaker",
    options: {
      threshold,
      initialBackoffMs,
      maxBackoffMs: Math.max(initialBackoffMs, DEFAULT_PROFILE_BREAKER.maxBackoffMs),
    },
  };
}

function wholeNumber(raw: string | undefined, fallback: number): number | null {
  if (raw === undefined || raw === "") return fallback;
  return /^[0-9]{1,9}$/.test(raw) ? Number(raw) : null;
}
