/**
 * Issue 18: a full spool made the next job FAILED/NONZERO_EXIT with an empty log while
 * diagnostics said healthy. On a small tmpfs as the spool (root only, to mount it): a job
 * that fills it ends FAILED/SPOOL_FULL, new submissions get 503 SPOOL_FULL and diagnostics
 * show the free space, and once space returns work is accepted and runs again.
 */
import { describe, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { localDaemonConfig, startedDaemon } from "../support/daemon-config.ts";
import { eventually } from "../support/eventually.ts";
import { tempDir } from "../support/temp-dir.ts";
import { mountTmpfs } from "../support/tmpfs.ts";

const isRoot = process.geteuid?.() === 0;
const MIB = 1024 * 1024;

async function api(
  socket: string,
  method: "GET" | "POST",
  path: string,
  body?: unknown,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`http://localhost${path}`, {
    unix: socket,
    method,
    headers: { "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

describe.skipIf(!isRoot)("a full spool is named (tmpfs, as root)", () => {
  test("SPOOL_FULL for the job that filled it, 503 for new work, accepted again once space returns", async () => {
    using base = tempDir("o4s-spoolfull-");
    const unmount = mountTmpfs(join(base.path, "mnt"), "8m", 0o755);
    try {
      const spoolDir = join(base.path, "mnt", "spool");
      const config = localDaemonConfig(join(base.path, "state"), {
        spoolDir,
        spoolLowWaterBytes: 2 * MIB,
      });
      const daemon = await startedDaemon(config);
      const socket = daemon.layout.apiSocket;
      const terminal = async (id: string) =>
        eventually(
          async () => {
            const w = (await api(socket, "GET", `/v1/workloads/${id}`)).body;
            return ["COMPLETED", "FAILED", "CANCELLED"].includes(String(w["phase"])) ? w : null;
          },
          { what: `workload ${id} ending`, timeoutMs: 30_000 },
        );
      try {
        const filler = await api(socket, "POST", "/v1/workloads", {
          kind: "BATCH",
          profile: "default",
          command: ["sh", "-c", "head -c 16777216 /dev/zero > big"],
        });
        expect(filler.status).toBe(201);
        const fillerId = String(filler.body["id"]);
        const ended = await terminal(fillerId);
        expect(ended["phase"]).toBe("FAILED");
        expect(ended["reason"]).toBe("SPOOL_FULL");

        const refused = await api(socket, "POST", "/v1/workloads", {
          kind: "BATCH",
          profile: "default",
          command: ["true"],
        });
        expect(refused.status).toBe(503);
        expect(refused.body["reason"]).toBe("SPOOL_FULL");
        const diagnostics = (await api(socket, "GET", "/v1/diagnostics")).body;
        const spool = diagnostics["spool"] as Record<string, unknown>;
        expect(spool["healthy"]).toBe(false);
        expect(Number(spool["freeBytes"])).toBeLessThan(2 * MIB);
        expect(spool["lowWaterBytes"]).toBe(2 * MIB);

        rmSync(join(daemon.layout.workspaceDir(fillerId), "big"));
        const accepted = await api(socket, "POST", "/v1/workloads", {
          kind: "BATCH",
          profile: "default",
          command: ["sh", "-c", "echo room again"],
        });
        expect(accepted.status).toBe(201);
        expect((await terminal(String(accepted.body["id"])))["phase"]).toBe("COMPLETED");
        const after = (await api(socket, "GET", "/v1/diagnostics")).body;
        expect((after["spool"] as Record<string, unknown>)["healthy"]).toBe(true);
      } finally {
        await daemon.stop();
      }
    } finally {
      unmount();
    }
  }, 60_000);
});
