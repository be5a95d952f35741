/**
 * Issue 33: an audit line appended on a full disk landed in part (the file's last page had
 * room for some of it), ran into the next entry once space returned, and every read of the
 * log threw after that (GET /v1/audit 500). On a small tmpfs (root only, to mount it): a
 * failed append leaves only whole lines, names the file, and the log reads again after.
 * Seen failing (a torn line, "JSON Parse error") without the cut back in audit-log.ts.
 */
import { describe, expect, test } from "bun:test";
import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { fileAuditLog } from "../../src/apps/daemon/audit-log.ts";
import type { AuditEntry } from "../../src/servers/http/deps.ts";
import { tempDir } from "../support/temp-dir.ts";
import { fillFilesystem, mountTmpfs } from "../support/tmpfs.ts";

const isRoot = process.geteuid?.() === 0;

function entry(i: number): AuditEntry {
  return {
    at: new Date(1_700_000_000_000 + i).toISOString(),
    principal: "admin",
    tokenId: null,
    action: `POST /v1/workloads/${"x".repeat(150)}`,
    workload: `w-${i}`,
    status: 201,
    peer: "unix",
  };
}

describe.skipIf(!isRoot)("the audit log on a full disk (tmpfs, as root)", () => {
  test("a failed append leaves whole lines and names the file; the log reads after", () => {
    using base = tempDir("o4s-audit-full-");
    const mnt = join(base.path, "mnt");
    const unmount = mountTmpfs(mnt, "1m", 0o700);
    try {
      const path = join(mnt, "audit.log");
      const audit = fileAuditLog({ path });
      audit.append(entry(0));
      fillFilesystem(join(mnt, "filler"));
      const errors: string[] = [];
      let appended = 1;
      // The first lines fit the file's last page; one then crosses it and fails part way.
      for (let i = 1; i < 100; i++) {
        try {
          audit.append(entry(i));
          appended += 1;
        } catch (error) {
          errors.push(String(error));
        }
      }
      expect(errors.length).toBeGreaterThan(0);
      expect(errors[0]).toContain(path);
      rmSync(join(mnt, "filler"));
      audit.append(entry(1000));
      const lines = readFileSync(path, "utf8").trimEnd().split("\n");
      for (const line of lines) expect(() => JSON.parse(line)).not.toThrow();
      expect(lines.length).toBe(appended + 1);
      const read = audit.read({ limit: 1000 });
      expect(read.map((e) => e.workload).at(-1)).toBe("w-1000");
    } finally {
      unmount();
    }
  });
});
