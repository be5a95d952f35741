/**
 * Per-workload resources on the local backend through the built binary (issue 35): a root
 * daemon with cgroups; `openai4s submit --mem 300M --cpus 1` runs in a job cgroup holding
 * exactly that (memory.limit_in_bytes, cpu.cfs_quota_us, or their v2 files), one that asks
 * nothing gets the profile's defaults, and one over the profile's maximum (its default here:
 * the built-in profile states none) is refused naming the field and the bound.
 * Seen failing with the cgroup sized from the profile again: 1000 MB and 2 CPUs.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { join } from "node:path";
import { cgroupDriver } from "../../src/adapters/backend-local/limit-enforcement.ts";
import { type Daemon, ensureBuilt, startDaemon } from "../support/binary-daemon.ts";
import { eventually } from "../support/eventually.ts";

const IS_ROOT = process.getuid?.() === 0;
const TIMEOUT_MS = 90_000;
const DEFAULT_MB = 1000;

describe.skipIf(!IS_ROOT)("per-workload resources through the binary, cgroups", () => {
  let d: Daemon;
  beforeAll(async () => {
    await ensureBuilt();
    d = await startDaemon({
      gateway: false,
      env: { OPENAI4S_LOCAL_MEMORY_MB: String(DEFAULT_MB) },
    });
  }, TIMEOUT_MS);
  afterAll(async () => {
    await d?.stop();
  });

  function driver() {
    const found = cgroupDriver({
      cgroupRoot: null,
      backendDir: join(d.stateDir, "backends", "local"),
    });
    if (found.kind !== "Driver") throw new Error("no cgroup driver");
    return found.driver;
  }

  /** A file of the job's cgroup, whichever hierarchy (v1) or directory (v2) has it. */
  function cgroupFile(name: string, ...files: string[]): string {
    for (const dir of driver().jobCgroup(name).dirs) {
      for (const file of files) {
        if (existsSync(join(dir, file))) return readFileSync(join(dir, file), "utf8").trim();
      }
    }
    throw new Error(`none of ${files.join(", ")} in ${name}'s cgroup`);
  }

  /** Submits a sleeper with `flags` and returns its memory and CPU limits once it runs. */
  async function limitsOf(...flags: string[]): Promise<{ memory: string; cpu: string }> {
    const r = await d.cli("submit", "--profile", "default", ...flags, "--", "/bin/sleep", "300");
    expect(r.stderr).toBe("");
    const id = r.stdout.trim().split(/\s+/).at(-1) ?? "";
    await eventually(async () => (await d.show(id)).phase === "RUNNING", {
      what: `${id} RUNNING`,
      timeoutMs: 30_000,
    });
    // The only job running: the one cgroup under the daemon's root is its.
    const [name, ...others] = driver().jobNames();
    expect(others).toEqual([]);
    if (name === undefined) throw new Error("no job cgroup");
    const limits = {
      memory: cgroupFile(name, "memory.limit_in_bytes", "memory.max"),
      cpu: cgroupFile(name, "cpu.cfs_quota_us", "cpu.max"),
    };
    expect((await d.cli("cancel", id)).code).toBe(0);
    await eventually(() => driver().jobNames().length === 0, { what: `${id}'s cgroup removed` });
    return limits;
  }

  test(
    "--mem 300M --cpus 1: the job's cgroup holds 300 MiB and one CPU",
    async () => {
      const { memory, cpu } = await limitsOf("--mem", "300M", "--cpus", "1");
      console.log(`asked: memory ${memory}, cpu ${cpu}`);
      expect(memory).toBe(String(300 * 1024 ** 2));
      expect(cpu.split(" ")[0]).toBe("100000");
    },
    TIMEOUT_MS,
  );

  test(
    "asking nothing: the profile's defaults",
    async () => {
      const { memory, cpu } = await limitsOf();
      expect(memory).toBe(String(DEFAULT_MB * 1024 ** 2));
      expect(cpu.split(" ")[0]).toBe(String(availableParallelism() * 100_000));
    },
    TIMEOUT_MS,
  );

  test(
    "over the profile's maximum: refused naming the field and the bound",
    async () => {
      const r = await d.cli("submit", "--profile", "default", "--mem", "2G", "--", "/bin/true");
      expect(r.code).not.toBe(0);
      expect(r.stderr).toContain("resources.memoryMb");
      expect(r.stderr).toContain(
        `profile "default" allows at most ${DEFAULT_MB} MB of memory per node (asked 2048)`,
      );
    },
    TIMEOUT_MS,
  );
});
