/**
 * The daemon process's own figures under the standard `process_*` names a Prometheus user
 * already has dashboards for: CPU seconds, resident memory, open file descriptors (a leak of
 * sockets or log streams shows here first) and the descriptor limit.
 */
import { readdirSync, readFileSync } from "node:fs";

export interface ProcessFigures {
  readonly cpuSeconds: number;
  readonly residentBytes: number;
  /** Null where /proc is not there to count them. */
  readonly openFds: number | null;
  readonly maxFds: number | null;
  readonly startTimeSeconds: number;
}

function maxOpenFiles(): number | null {
  try {
    const line = readFileSync("/proc/self/limits", "utf8")
      .split("\n")
      .find((l) => l.startsWith("Max open files"));
    const soft = line?.slice("Max open files".length).trim().split(/\s+/)[0];
    const n = Number(soft);
    return soft !== undefined && Number.isFinite(n) ? n : null;
  } catch {
    return null;
  }
}

export function createProcessFigures(): () => ProcessFigures {
  const startTimeSeconds = performance.timeOrigin / 1000;
  return () => {
    const cpu = process.cpuUsage();
    let openFds: number | null = null;
    try {
      openFds = readdirSync("/proc/self/fd").length;
    } catch {
      openFds = null;
    }
    return {
      cpuSeconds: (cpu.user + cpu.system) / 1e6,
      residentBytes: process.memoryUsage.rss(),
      openFds,
      maxFds: maxOpenFiles(),
      startTimeSeconds,
    };
  };
}
