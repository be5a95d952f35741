/**
 * The audit log's failed writes, said once per episode. On a full state dir every
 * state-changing request failed its audit append, and each logged the same error line: a
 * burst of a thousand refused submissions wrote a thousand lines to the journal while the
 * admin needed two, "the audit log is failing" and "it works again, N entries lost". The
 * first failure is logged with its error; later ones are counted; the first append that
 * works again logs how many were lost. A lost entry is not retried: its request was
 * already answered, and an entry appended late would be out of order.
 */
import type { Log } from "../../lib/log.ts";
import type { AuditLog } from "../../servers/http/deps.ts";

export function reportingAuditFailures(inner: AuditLog, log: Log): AuditLog {
  let lost = 0;
  return {
    append(entry) {
      try {
        inner.append(entry);
      } catch (error) {
        if (lost === 0) {
          log.error("audit log write failed; entries are lost until it works again", {
            error: String(error),
          });
        }
        lost += 1;
        return;
      }
      if (lost > 0) {
        log.warn("audit log writes work again", { lostEntries: lost });
        lost = 0;
      }
    },
    read: (query) => inner.read(query),
  };
}
