/**
 * The local profiles as a daemon with `env` would build them: its settings parsed as at start
 * (apps/daemon/composition/local-settings.ts), then the backend's profiles from them. A bad variable is a
 * ConfigError naming it, as the start would refuse.
 */
import { type LocalProfiles, localProfiles } from "../../src/adapters/backend-local/profiles.ts";
import { parseLocalSettings } from "../../src/adapters/backend-local/settings.ts";

export function localProfilesFromEnv(
  env: Readonly<Record<string, string | undefined>>,
  file: Parameters<typeof localProfiles>[1] = null,
): LocalProfiles {
  const parsed = parseLocalSettings(env);
  if (parsed.kind === "Invalid") {
    return { kind: "ConfigError", message: parsed.errors.map((e) => e.message).join("; ") };
  }
  return localProfiles(parsed.local.knobs, file);
}
