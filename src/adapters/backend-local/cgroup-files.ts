/**
 * The file operations both cgroup adapters share: a cgroup is a directory of small text
 * files, written one value at a time, read as "key value" lines or one number.
 */
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmdirSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { errorCode } from "../../lib/durable-fs.ts";

/** The CFS period a CPU quota is counted in (the kernel's default, 100 ms), both versions. */
export const CPU_PERIOD_US = 100_000;

/**
 * The CPU quota per period for `cpus` CPUs (2 = two full CPUs), never under 1 ms (the
 * kernel refuses less); null: no quota.
 */
export function cpuQuotaUs(cpus: number | null): number | null {
  return cpus === null ? null : Math.max(1000, Math.round(cpus * CPU_PERIOD_US));
}

export function writeControl(dir: string, file: string, value: string): void {
  try {
    writeFileSync(join(dir, file), value);
  } catch (error) {
    // The path and the value, or "EINVAL" names nothing an admin can act on.
    throw new Error(
      `cannot write ${JSON.stringify(value)} to ${join(dir, file)}: ${String(error)}`,
    );
  }
}

/** Writes a control only where the kernel offers it (memsw needs swap accounting). */
export function writeControlIfPresent(dir: string, file: string, value: string): void {
  if (existsSync(join(dir, file))) writeControl(dir, file, value);
}

/** The number after `key` in a flat-keyed file ("oom_kill 3"); 0 when absent. */
export function readKeyed(dir: string, file: string, key: string): number {
  const text = readOptional(dir, file);
  if (text === null) return 0;
  for (const line of text.split("\n")) {
    const [k, n] = line.trim().split(/\s+/);
    if (k === key && n !== undefined && /^[0-9]+$/.test(n)) return Number(n);
  }
  return 0;
}

/** A single-number file; null when absent or not a number ("max"). */
export function readNumber(dir: string, file: string): number | null {
  const text = readOptional(dir, file)?.trim() ?? null;
  return text !== null && /^[0-9]+$/.test(text) ? Number(text) : null;
}

function readOptional(dir: string, file: string): string | null {
  try {
    return readFileSync(join(dir, file), "utf8");
  } catch (error) {
    if (errorCode(error) === "ENOENT") return null;
    throw error;
  }
}

export function pidsIn(dir: string): number[] {
  const text = readOptional(dir, "cgroup.procs");
  if (text === null) return [];
  return text
    .split("\n")
    .filter((l) => /^[0-9]+$/.test(l))
    .map(Number);
}

export function killPids(pids: readonly number[]): void {
  for (const pid of pids) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // Exited meanwhile.
    }
  }
}

/** mkdir -p; a cgroup directory comes with its control files. */
export function ensureDir(dir: string): void {
  mkdirSync(dir, { recursive: true });
}

/** rmdir; true when gone (or never there), false while busy. */
export function removeDir(dir: string): boolean {
  try {
    rmdirSync(dir);
    return true;
  } catch (error) {
    const code = errorCode(error);
    if (code === "ENOENT") return true;
    if (code === "EBUSY" || code === "ENOTEMPTY") return false;
    throw error;
  }
}

/** Child directories (job cgroups) of a daemon root; none when it does not exist. */
export function childDirs(dir: string): readonly string[] {
  try {
    return readdirSync(dir, { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .map((e) => e.name);
  } catch (error) {
    if (errorCode(error) === "ENOENT") return [];
    throw error;
  }
}
