/**
 * Which daemon binary this is, for a remembered isolation verdict: the version, and the
 * executable (and, from source, the entry file) by path, size and modification time. Two
 * builds of one version differ; reading the whole binary to hash it would cost about a
 * hundred milliseconds of every start.
 */
import { statSync } from "node:fs";
import { isAbsolute } from "node:path";
import { VERSION } from "../../../lib/version.ts";

export function binaryIdentity(selfCommand: readonly string[]): string {
  const parts = [VERSION];
  for (const path of selfCommand.slice(0, 2)) {
    if (!isAbsolute(path)) continue;
    try {
      const st = statSync(path);
      parts.push(`${path}:${st.size}:${Math.round(st.mtimeMs)}`);
    } catch {
      parts.push(`${path}:missing`);
    }
  }
  return parts.join(" ");
}
