/**
 * A message shown beside its reason, without saying the reason twice. Backends explain some
 * endings as "REASON: figures: what to do" (the API's hint is read from that form), and the
 * CLI printed "FAILED (OUT_OF_MEMORY) - OUT_OF_MEMORY: used ..." (issue 19).
 */
export function messageBesideReason(
  reason: string | null | undefined,
  message: string | null | undefined,
): string {
  if (!message) return "";
  if (!reason) return message;
  const prefix = `${reason}: `;
  return message.startsWith(prefix) ? message.slice(prefix.length) : message;
}
