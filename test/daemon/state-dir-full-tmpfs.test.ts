/**
 * Issue 33: with the state dir on a small tmpfs filled, jobs that had run and exited 0 ended
 * LOST (their exit records had nowhere to go), new submissions got 500 INTERNAL_ERROR while
 * /healthz said ok, and the log never named the failed write. Staged here on a 4 MiB tmpfs
 * state dir (root only, to mount it), local backend: a job running when the disk fills still
 * gets its end recorded; new work gets 503 STATE_DIR_FULL; health, diagnostics and /metrics
 * say so; once space returns everything works again without a restart, and no workload is
 * LOST or ran twice.
 */
import { describe, expect, test } from "bun:test";
import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { localDaemonConfig, startedDaemon } from "../support/daemon-config.ts";
import { eventually } from "../support/eventually.ts";
import { tempDir } from "../support/temp-dir.ts";
import { fillFilesystem as fill, mountTmpfs } from "../support/tmpfs.ts";

const isRoot = process.geteuid?.() === 0;
const MIB = 1024 * 1024;

async function api(
  socket: string,
  method: "GET" | "POST",
  path: string,
  body?: unknown,
): Promise<{ status: number; body: Record<string, unknown>; text: string }> {
  const res = await fetch(`http://localhost${path}`, {
    unix: socket,
    method,
    headers: { "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  let parsed: Record<string, unknown> = {};
  try {
    parsed = JSON.parse(text) as Record<string, unknown>;
  } catch {}
  return { status: res.status, body: parsed, text };
}

/** `run` against a daemon whose state dir is a 4 MiB tmpfs (low water 1 MiB), then cleaned up. */
async function onSmallStateDir(
  prefix: string,
  run: (on: {
    readonly mnt: string;
    readonly stateDir: string;
    readonly daemon: Awaited<ReturnType<typeof startedDaemon>>;
    readonly socket: string;
    readonly view: (id: string) => Promise<Record<string, unknown>>;
  }) => Promise<void>,
): Promise<void> {
  using base = tempDir(prefix);
  const mnt = join(base.path, "mnt");
  const unmount = mountTmpfs(mnt, "4m", 0o700);
  try {
    const stateDir = join(mnt, "state");
    const config = localDaemonConfig(stateDir, {
      spoolDir: join(base.path, "spool"),
      stateLowWaterBytes: 1 * MIB,
    });
    const daemon = await startedDaemon(config);
    const socket = daemon.layout.apiSocket;
    const view = async (id: string) => (await api(socket, "GET", `/v1/workloads/${id}`)).body;
    try {
      await run({ mnt, stateDir, daemon, socket, view });
    } finally {
      await daemon.stop();
    }
  } finally {
    unmount();
  }
}

describe.skipIf(!isRoot)("a full state dir loses nothing (tmpfs, as root)", () => {
  test("the running job's end is kept; 503 STATE_DIR_FULL and degraded health; back without a restart", async () => {
    await onSmallStateDir("o4s-statefull-", async ({ mnt, stateDir, daemon, socket, view }) => {
      const running = await api(socket, "POST", "/v1/workloads", {
        kind: "BATCH",
        profile: "default",
        command: ["sh", "-c", "echo ran >> runs; while [ ! -e go ]; do sleep 0.05; done"],
      });
      expect(running.status).toBe(201);
      const id = String(running.body["id"]);
      await eventually(async () => (await view(id))["phase"] === "RUNNING", {
        what: "the job running",
        timeoutMs: 30_000,
      });

      fill(join(mnt, "filler"));
      const refused = await api(socket, "POST", "/v1/workloads", {
        kind: "BATCH",
        profile: "default",
        command: ["true"],
      });
      expect(refused.status).toBe(503);
      expect(refused.body["reason"]).toBe("STATE_DIR_FULL");
      const health = (await api(socket, "GET", "/healthz")).body;
      expect(health["status"]).toBe("degraded");
      expect(String(health["problems"])).toContain(stateDir);
      const diagnostics = (await api(socket, "GET", "/v1/diagnostics")).body;
      const state = diagnostics["stateDir"] as Record<string, unknown>;
      expect(state["healthy"]).toBe(false);
      expect(state["lowWaterBytes"]).toBe(1 * MIB);
      expect(Number(state["freeBytes"])).toBeLessThan(1 * MIB);
      const metrics = (await api(socket, "GET", "/metrics")).text;
      expect(metrics).toContain("openai4s_state_dir_low 1");
      expect(metrics).toContain(`openai4s_state_dir_low_water_bytes ${1 * MIB}`);

      // The job ends while the disk is full: its end record still lands (room reserved).
      await Bun.write(join(daemon.layout.workspaceDir(id), "go"), "");
      const local = join(stateDir, "backends", "local");
      // Its record, or (a poll late on a loaded machine) the daemon already past it: it
      // removes a job's records once it has stored the end they say.
      await eventually(
        async () =>
          [...new Bun.Glob("**/exit.json").scanSync({ cwd: local })].length === 1 ||
          (await view(id))["phase"] === "COMPLETED",
        { what: "the exit record written on a full state dir", timeoutMs: 30_000 },
      );

      rmSync(join(mnt, "filler"));
      const ended = await eventually(
        async () => {
          const w = await view(id);
          return ["COMPLETED", "FAILED", "LOST", "CANCELLED"].includes(String(w["phase"]))
            ? w
            : null;
        },
        { what: "the job's end seen", timeoutMs: 30_000 },
      );
      expect(ended["phase"]).toBe("COMPLETED");
      expect((await api(socket, "GET", "/healthz")).body["status"]).toBe("ok");
      const again = await api(socket, "POST", "/v1/workloads", {
        kind: "BATCH",
        profile: "default",
        command: ["sh", "-c", "echo again >> runs"],
      });
      expect(again.status).toBe(201);
      const second = await eventually(
        async () => {
          const w = await view(String(again.body["id"]));
          return ["COMPLETED", "FAILED", "LOST"].includes(String(w["phase"])) ? w : null;
        },
        { what: "the job after recovery", timeoutMs: 30_000 },
      );
      expect(second["phase"]).toBe("COMPLETED");
      // Each ran exactly once.
      expect(readFileSync(join(daemon.layout.workspaceDir(id), "runs"), "utf8")).toBe("ran\n");
      const secondDir = daemon.layout.workspaceDir(String(again.body["id"]));
      expect(readFileSync(join(secondDir, "runs"), "utf8")).toBe("again\n");
    });
  }, 120_000);

  test("an array's element records are kept: every element of a 300-element array ends on a full disk", async () => {
    // Each element appends two lines to elements.jsonl (~600 bytes): the single job's 64 KiB
    // reserve ran out a hundred elements in, and the rest had nowhere to record their end.
    await onSmallStateDir(
      "o4s-statefull-array-",
      async ({ mnt, stateDir, daemon, socket, view }) => {
        const size = 300;
        const created = await api(socket, "POST", "/v1/workloads", {
          kind: "BATCH",
          profile: "default",
          array: size,
          maxConcurrent: 1,
          // Element 0 holds the array until the disk is full; the rest run then, one by one.
          command: [
            "sh",
            "-c",
            'if [ "$OPENAI4S_ARRAY_INDEX" = 0 ]; then while [ ! -e go ]; do sleep 0.05; done; fi',
          ],
        });
        expect(created.status).toBe(201);
        const id = String(created.body["id"]);
        await eventually(async () => (await view(id))["phase"] === "RUNNING", {
          what: "the array running",
          timeoutMs: 30_000,
        });
        fill(join(mnt, "filler"));
        await Bun.write(join(daemon.layout.workspaceDir(id), "go"), "");
        const local = join(stateDir, "backends", "local");
        // The array's end on the full disk: its records, read while they are there; or, when
        // a poll comes late (a loaded machine), what the daemon folded of them before it
        // removed them, the attempt's element counts (CI once missed the records' window).
        const end = await eventually(
          async () => {
            const [elements] = [...new Bun.Glob("**/elements.jsonl").scanSync({ cwd: local })];
            const exits = [...new Bun.Glob("**/exit.json").scanSync({ cwd: local })];
            if (exits.length === 1 && elements !== undefined) {
              const lines = readFileSync(join(local, String(elements)), "utf8")
                .trim()
                .split("\n");
              const ends = lines.filter(
                (l) => (JSON.parse(l) as { exit?: unknown }).exit !== undefined,
              );
              return { from: "records", ends: ends.length };
            }
            const w = await view(id);
            if (w["phase"] !== "COMPLETED") return null;
            const attempts = w["allocations"] as {
              array: { counts: Record<string, number> } | null;
            }[];
            return { from: "daemon", ends: attempts.at(-1)?.array?.counts["COMPLETED"] ?? 0 };
          },
          { what: "the array's end written on a full state dir", timeoutMs: 60_000 },
        );
        expect(end.ends).toBe(size);
        rmSync(join(mnt, "filler"));
        const ended = await eventually(
          async () => {
            const w = await view(id);
            return ["COMPLETED", "FAILED", "LOST", "CANCELLED"].includes(String(w["phase"]))
              ? w
              : null;
          },
          { what: "the array's end seen", timeoutMs: 30_000 },
        );
        expect(ended["phase"]).toBe("COMPLETED");
      },
    );
  }, 150_000);
});
