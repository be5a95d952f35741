/**
 * A job array on the local backend through the BUILT binary, as a user types it:
 * `submit --array 5 --max-concurrent 2`, then `show` (one phase, the failed index named) and
 * `logs --index K` (each element's own output). The elements mark their start and end in
 * their shared workspace, so the cap is measured from inside the sandbox, and the profile's
 * `maxArraySize` is what `GET /v1/profiles` shows.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { cgroupDriver } from "../../src/adapters/backend-local/limit-enforcement.ts";
import {
  type Daemon,
  ensureBuilt,
  processesMentioning,
  startDaemon,
} from "../support/binary-daemon.ts";
import { eventually } from "../support/eventually.ts";

const TIMEOUT_MS = 90_000;
// Small per-element limits, so five elements never weigh on the host.
const LIMITS = { OPENAI4S_LOCAL_MEMORY_MB: "200", OPENAI4S_LOCAL_PIDS_MAX: "64" };

const ELEMENT = [
  'echo "+ $OPENAI4S_ARRAY_INDEX" >> "$HOME/marks"',
  "sleep 0.4",
  'echo "element $OPENAI4S_ARRAY_INDEX"',
  'echo "- $OPENAI4S_ARRAY_INDEX" >> "$HOME/marks"',
  // Which cgroup it runs in: each element its own, named for its index.
  "grep memory /proc/self/cgroup >&2",
  '[ "$OPENAI4S_ARRAY_INDEX" != 3 ] || exit 7',
].join("; ");

describe("local job arrays through the binary", () => {
  let d: Daemon;
  beforeAll(async () => {
    await ensureBuilt();
    d = await startDaemon({ gateway: false, env: LIMITS });
  }, TIMEOUT_MS);
  afterAll(async () => {
    await d?.stop();
  });

  test(
    "submit --array 5 --max-concurrent 2: at most 2 at once, index 3 named, logs --index K",
    async () => {
      const profiles = await fetch("http://localhost/v1/profiles", { unix: d.socket });
      const listed = (await profiles.json()) as {
        profiles: { name: string; resources: { maxArraySize: number } }[];
      };
      expect(listed.profiles.find((p) => p.name === "default")?.resources.maxArraySize).toBe(1000);

      const submitted = await d.cli(
        "submit",
        "--profile",
        "default",
        "--array",
        "5",
        "--max-concurrent",
        "2",
        "--",
        "/bin/sh",
        "-c",
        ELEMENT,
      );
      expect(submitted.code).toBe(0);
      const id = submitted.stdout.trim().split(/\s+/).at(-1) ?? "";
      await d.cli("wait", id, "--timeout", "60s");
      const view = await d.show(id);
      expect(view).toMatchObject({ phase: "FAILED", reason: "NONZERO_EXIT", exitCode: 7 });
      expect(view.message).toContain("1 of 5 elements failed (index 3)");
      // Every element's state reaches the view (issue 21): counts and indices by phase, and
      // the element that failed with its reason and exit code.
      expect(view.allocations.at(-1)?.array).toEqual({
        size: 5,
        maxConcurrent: 2,
        counts: { COMPLETED: 4, FAILED: 1 },
        indices: { COMPLETED: "0-2,4", FAILED: "3" },
        elements: [{ index: 3, phase: "FAILED", reason: "NONZERO_EXIT", exitCode: 7 }],
        elementsOmitted: 0,
      });
      const shown = await d.cli("show", id);
      expect(shown.stdout).toContain("Array:       5 elements, at most 2 at once");
      expect(shown.stdout).toContain("Elements:    4 completed, 1 failed (3)");
      expect(shown.stdout).toMatch(/^3 +FAILED +NONZERO_EXIT +7$/m);

      for (const index of [0, 3, 4]) {
        const log = await d.cli("logs", id, "--index", String(index));
        expect(log).toMatchObject({ code: 0, stdout: `element ${index}\n` });
      }
      const noIndex = await d.cli("logs", id);
      expect(noIndex.code).not.toBe(0);
      expect(noIndex.stderr).toContain("index");

      const marks = await fetch(`http://localhost/v1/workloads/${id}/files/marks`, {
        unix: d.socket,
      });
      expect(marks.status).toBe(200);
      let running = 0;
      let most = 0;
      const started: string[] = [];
      for (const line of (await marks.text()).split("\n").filter((l) => l !== "")) {
        const [sign, index] = line.split(" ");
        if (sign === "+") started.push(String(index));
        running += sign === "+" ? 1 : -1;
        most = Math.max(most, running);
      }
      expect(most).toBe(2);
      expect(started.sort()).toEqual(["0", "1", "2", "3", "4"]);

      const diagnostics = await fetch("http://localhost/v1/diagnostics", { unix: d.socket });
      if (!JSON.stringify(await diagnostics.json()).includes("cgroup")) return;
      // Under cgroups each element is held in its own, with the profile's limits, and none
      // is left once the array ended.
      for (const index of [1, 4]) {
        const own = await d.cli("logs", id, "--stderr", "--index", String(index));
        expect(own.stdout).toMatch(new RegExp(`/o4s-[a-z0-9]+\\.${index}\n`));
      }
      const found = cgroupDriver({
        cgroupRoot: null,
        backendDir: join(d.stateDir, "backends", "local"),
      });
      if (found.kind !== "Driver") throw new Error("no cgroup driver");
      await eventually(() => found.driver.jobNames().length === 0, {
        what: "every element's cgroup removed",
      });
    },
    TIMEOUT_MS,
  );
});

describe("cancelling a local job array through the binary", () => {
  let d: Daemon | undefined;
  afterAll(async () => {
    await d?.stop();
  });

  test(
    "cancel ends the running elements and the waiting ones never start",
    async () => {
      await ensureBuilt();
      const daemon = await startDaemon({ gateway: false, env: LIMITS });
      d = daemon;
      const submitted = await daemon.cli(
        "submit",
        "--array",
        "6",
        "--max-concurrent",
        "2",
        "--",
        "/bin/sh",
        "-c",
        'echo "+ $OPENAI4S_ARRAY_INDEX" >> "$HOME/marks"; exec sleep 600',
      );
      const id = submitted.stdout.trim().split(/\s+/).at(-1) ?? "";
      const workspace = join("workloads", id, "workspace");
      const marks = async () => {
        const res = await fetch(`http://localhost/v1/workloads/${id}/files/marks`, {
          unix: daemon.socket,
        });
        return res.status === 200 ? (await res.text()).trim().split("\n") : [];
      };
      await eventually(async () => (await marks()).length === 2, { what: "two elements started" });
      expect((await daemon.cli("cancel", id)).code).toBe(0);
      expect((await daemon.cli("wait", id, "--timeout", "60s")).code).not.toBe(0);
      expect(await daemon.show(id)).toMatchObject({ phase: "CANCELLED" });
      await eventually(() => processesMentioning(workspace).length === 0, {
        what: "no element left running",
      });
      expect(await marks()).toHaveLength(2);
      // A started element has its log, even empty; the waiting ones were never started.
      expect((await daemon.cli("logs", id, "--index", "1")).code).toBe(0);
      for (const index of ["2", "5"]) {
        const log = await daemon.cli("logs", id, "--index", index);
        expect(log.code).not.toBe(0);
        expect(log.stderr).toContain("no stdout log");
      }
    },
    TIMEOUT_MS,
  );
});

describe("a local job array across a daemon restart, through the binary", () => {
  let first: Daemon | undefined;
  let second: Daemon | undefined;
  afterAll(async () => {
    await second?.stop();
    await first?.stop();
  });

  test(
    "stopped and started mid-array: every element runs once, never more than the cap",
    async () => {
      await ensureBuilt();
      const d = await startDaemon({ gateway: false, env: LIMITS });
      first = d;
      const wait = 'while [ ! -e "$HOME/release" ]; do sleep 0.05; done';
      const element = `echo "+ $OPENAI4S_ARRAY_INDEX" >> "$HOME/marks"; ${wait}; echo "- $OPENAI4S_ARRAY_INDEX" >> "$HOME/marks"`;
      const submitted = await d.cli(
        "submit",
        "--array",
        "4",
        "--max-concurrent",
        "2",
        "--",
        "/bin/sh",
        "-c",
        element,
      );
      expect(submitted.code).toBe(0);
      const id = submitted.stdout.trim().split(/\s+/).at(-1) ?? "";
      const marksOf = async (daemon: Daemon) => {
        const res = await fetch(`http://localhost/v1/workloads/${id}/files/marks`, {
          unix: daemon.socket,
        });
        return res.status === 200 ? await res.text() : "";
      };
      await eventually(async () => (await marksOf(d)).split("\n").length - 1 === 2, {
        what: "two elements started",
      });
      // Stopped the way an admin stops it: the array's supervisor is not the daemon's child.
      d.proc.kill("SIGTERM");
      await d.proc.exited;
      const restarted = await startDaemon({ gateway: false, env: LIMITS, stateDir: d.stateDir });
      second = restarted;
      const put = await fetch(`http://localhost/v1/workloads/${id}/files/release`, {
        unix: restarted.socket,
        method: "PUT",
        body: "",
      });
      expect(put.status).toBe(201);
      expect((await restarted.cli("wait", id, "--timeout", "60s")).code).toBe(0);
      expect(await restarted.show(id)).toMatchObject({ phase: "COMPLETED" });
      let running = 0;
      let most = 0;
      const started: string[] = [];
      for (const line of (await marksOf(restarted)).split("\n").filter((l) => l !== "")) {
        const [sign, index] = line.split(" ");
        if (sign === "+") started.push(String(index));
        running += sign === "+" ? 1 : -1;
        most = Math.max(most, running);
      }
      expect(most).toBe(2);
      expect(started.sort()).toEqual(["0", "1", "2", "3"]);
    },
    TIMEOUT_MS,
  );
});
