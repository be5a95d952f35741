/**
 * A full state dir made every state-changing request log "audit log write failed": one line
 * per request. The episode is now said twice, when it starts and when it ends with the count
 * of entries lost; nothing else. Seen failing with the once-only guard planted out (a line
 * per failure).
 */
import { describe, expect, test } from "bun:test";
import { reportingAuditFailures } from "../../src/apps/daemon/audit-failures.ts";
import type { Log, LogFields } from "../../src/lib/log.ts";
import type { AuditEntry, AuditLog } from "../../src/servers/http/deps.ts";

function recordingLog(): Log & {
  readonly lines: { level: string; message: string; fields?: LogFields }[];
} {
  const lines: { level: string; message: string; fields?: LogFields }[] = [];
  const at = (level: string) => (message: string, fields?: LogFields) => {
    lines.push({ level, message, ...(fields ? { fields } : {}) });
  };
  return { lines, debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error") };
}

/** An audit log whose disk is full while `full` says so. */
function flakyLog(): AuditLog & { full: boolean; readonly kept: AuditEntry[] } {
  const kept: AuditEntry[] = [];
  const audit = {
    full: false,
    kept,
    append(entry: AuditEntry) {
      if (audit.full) throw new Error("cannot append to the audit log /s/audit.log: ENOSPC");
      kept.push(entry);
    },
    read: () => kept,
  };
  return audit;
}

const entry = (i: number): AuditEntry => ({
  at: new Date(1_700_000_000_000 + i).toISOString(),
  principal: "admin",
  tokenId: null,
  action: "POST /v1/workloads",
  workload: `w-${i}`,
  status: 201,
  peer: "unix",
});

describe("audit log failures are said once per episode", () => {
  test("one error when writes start failing, one warning with the count when they work again", () => {
    const inner = flakyLog();
    const log = recordingLog();
    const audit = reportingAuditFailures(inner, log);
    audit.append(entry(0));
    inner.full = true;
    for (let i = 1; i <= 500; i++) expect(() => audit.append(entry(i))).not.toThrow();
    expect(log.lines).toHaveLength(1);
    expect(log.lines[0]?.level).toBe("error");
    expect(String(log.lines[0]?.fields?.["error"])).toContain("ENOSPC");
    inner.full = false;
    audit.append(entry(501));
    audit.append(entry(502));
    expect(log.lines).toHaveLength(2);
    expect(log.lines[1]).toMatchObject({ level: "warn", fields: { lostEntries: 500 } });
    expect(inner.kept.map((e) => e.workload)).toEqual(["w-0", "w-501", "w-502"]);
    // A second episode is said again, counted from zero.
    inner.full = true;
    audit.append(entry(503));
    inner.full = false;
    audit.append(entry(504));
    expect(log.lines.slice(2).map((l) => l.level)).toEqual(["error", "warn"]);
    expect(log.lines[3]?.fields).toEqual({ lostEntries: 1 });
  });

  test("reads go to the log underneath", () => {
    const inner = flakyLog();
    const audit = reportingAuditFailures(inner, recordingLog());
    audit.append(entry(7));
    expect(audit.read({ limit: 10 }).map((e) => e.workload)).toEqual(["w-7"]);
  });
});
