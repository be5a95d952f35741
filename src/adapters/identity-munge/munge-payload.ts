/**
 * What a MUNGE credential presented to the daemon carries as its payload: the request it is
 * for, and the daemon it is for. MUNGE proves the uid and refuses a credential decoded twice
 * on one node or past its TTL; the payload makes a credential captured on its way to one
 * daemon (or for one request) worthless anywhere else: another socket, another host:port,
 * another method or path. The CLI writes it (apps/cli), the daemon checks it (here).
 */
import type { MungeBinding } from "../../core/ports/site-identity.ts";

export const PAYLOAD_VERSION = "openai4s-munge-1";

export function mungePayload(binding: MungeBinding): string {
  return JSON.stringify({
    v: PAYLOAD_VERSION,
    aud: binding.audience,
    method: binding.method,
    path: binding.path,
  });
}

/** Null when the payload is exactly for this binding, else what differs (never its value). */
export function payloadMismatch(payload: string, binding: MungeBinding): string | null {
  let parsed: Record<string, unknown>;
  try {
    parsed = JSON.parse(payload) as Record<string, unknown>;
  } catch {
    return "its payload is not an openai4s request binding";
  }
  if (parsed === null || typeof parsed !== "object" || parsed.v !== PAYLOAD_VERSION) {
    return "its payload is not an openai4s request binding";
  }
  if (parsed.aud !== binding.audience) return "it was made for another daemon or address";
  if (parsed.method !== binding.method || parsed.path !== binding.path) {
    return "it was made for another request";
  }
  return null;
}
