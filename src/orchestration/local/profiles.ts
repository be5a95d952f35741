/**
 * The local backend's profiles as the daemon's environment configures them. One knob so far:
 * OPENAI4S_WARN_MINUTES_BEFORE_LIMIT, the local counterpart of a cluster profile's
 * `warn_minutes_before_limit` (how long before its time limit a job's history gets its
 * TIME_LIMIT_NEAR event and its process group SIGURG; 0 turns both off). Unset: the default.
 */
import type { ResourceProfile } from "../models.ts";
import { defaultLocalProfiles } from "./backend.ts";

export const WARN_MINUTES_ENV = "OPENAI4S_WARN_MINUTES_BEFORE_LIMIT";
/** The cluster profiles' own bound (about 18 hours, the scheduler signal's limit in minutes). */
const MAX_WARN_MINUTES = 1_092;

export type LocalProfiles =
  | { readonly kind: "Valid"; readonly profiles: readonly ResourceProfile[] }
  | { readonly kind: "ConfigError"; readonly message: string };

export function localProfiles(env: Readonly<Record<string, string | undefined>>): LocalProfiles {
  const profiles = defaultLocalProfiles();
  const raw = env[WARN_MINUTES_ENV];
  if (raw === undefined || raw === "") return { kind: "Valid", profiles };
  // Digits only: "5m" or "1.5" read three ways by three people.
  const minutes = /^[0-9]{1,4}$/.test(raw) ? Number(raw) : Number.NaN;
  if (!(minutes >= 0 && minutes <= MAX_WARN_MINUTES)) {
    return {
      kind: "ConfigError",
      message: `${WARN_MINUTES_ENV}=${JSON.stringify(raw)}: expected whole minutes from 0 to ${MAX_WARN_MINUTES}`,
    };
  }
  return {
    kind: "Valid",
    profiles: profiles.map((p) => ({ ...p, warnBeforeLimitSeconds: minutes * 60 })),
  };
}
