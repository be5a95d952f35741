import { afterEach, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { migrateStateDir } from "../../src/apps/daemon/state-migration.ts";
import { stateLayout } from "../../src/core/layout.ts";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
function tmp(parent = tmpdir()): string {
  const d = mkdtempSync(join(parent, "o4s-mig-"));
  dirs.push(d);
  return d;
}

/** An old-layout state dir: workloads/W/{workspace,allocations/A} inside it. */
function oldState(root: string): void {
  mkdirSync(join(root, "workloads", "w1", "workspace"), { recursive: true });
  mkdirSync(join(root, "workloads", "w1", "allocations", "a1"), { recursive: true });
  writeFileSync(join(root, "workloads", "w1", "workspace", "data"), "d");
  writeFileSync(join(root, "workloads", "w1", "allocations", "a1", "stdout.log"), "out");
  writeFileSync(join(root, "workloads", "w1", "allocations", "a1", "session-attempt.json"), "{}");
}

describe("migrateStateDir", () => {
  test("a new-layout or empty state dir has nothing to do", () => {
    const root = join(tmp(), "state");
    mkdirSync(root);
    const rewrites: string[] = [];
    const result = migrateStateDir(stateLayout(root), {
      rewriteBackendRecords: (from) => rewrites.push(from),
    });
    expect(result).toEqual({ kind: "NothingToDo" });
    expect(rewrites).toEqual([]);
  });

  test("moves workloads to the spool, attempt records to the private dir, records rewritten", () => {
    const root = join(tmp(), "state");
    oldState(root);
    const layout = stateLayout(root);
    const rewrites: [string, string][] = [];
    const result = migrateStateDir(layout, {
      rewriteBackendRecords: (from, to) => rewrites.push([from, to]),
    });
    expect(result).toEqual({ kind: "Migrated", workloads: 1, attemptRecords: 1 });
    expect(rewrites).toEqual([[join(root, "workloads"), join(layout.spool, "workloads")]]);
    expect(existsSync(join(root, "workloads"))).toBe(false);
    expect(readFileSync(join(layout.workspaceDir("w1"), "data"), "utf8")).toBe("d");
    expect(readFileSync(layout.jobLogPath("w1", "a1", "stdout"), "utf8")).toBe("out");
    expect(existsSync(join(layout.attemptRecordDir("w1", "a1"), "session-attempt.json"))).toBe(
      true,
    );
    // Idempotent: a second start finds nothing to do.
    expect(migrateStateDir(layout, { rewriteBackendRecords: () => {} }).kind).toBe("NothingToDo");
  });

  test("a workload already in the spool is a conflict named, not an overwrite", () => {
    const root = join(tmp(), "state");
    oldState(root);
    const layout = stateLayout(root);
    mkdirSync(layout.workspaceDir("w1"), { recursive: true });
    const rewrites: string[] = [];
    const result = migrateStateDir(layout, { rewriteBackendRecords: (f) => rewrites.push(f) });
    expect(result.kind).toBe("Refused");
    expect(result.kind === "Refused" && result.message).toContain("already exists");
    expect(rewrites).toEqual([]);
    expect(readFileSync(join(root, "workloads", "w1", "workspace", "data"), "utf8")).toBe("d");
  });

  test.skipIf(!existsSync("/dev/shm"))(
    "a spool on another filesystem: refused with what to do, nothing moved",
    () => {
      const root = join(tmp(), "state");
      oldState(root);
      const spool = join(tmp("/dev/shm"), "spool");
      const rewrites: string[] = [];
      const result = migrateStateDir(stateLayout(root, spool), {
        rewriteBackendRecords: (from) => rewrites.push(from),
      });
      expect(rewrites).toEqual([]);
      expect(
        existsSync(join(root, "workloads", "w1", "allocations", "a1", "session-attempt.json")),
      ).toBe(true);
      expect(result.kind).toBe("Refused");
      expect(result.kind === "Refused" && result.message).toContain("another filesystem");
      expect(readFileSync(join(root, "workloads", "w1", "workspace", "data"), "utf8")).toBe("d");
    },
  );
});
