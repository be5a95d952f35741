/**
 * How a kernel's interpreter ended, in the words its cell and its status report: an exit
 * code, a signal, and whether the out-of-memory killer sent that signal (the one cause a user
 * cannot otherwise tell from `kill -9`).
 */
import { readFileSync } from "node:fs";

/** "exit code 1", "signal SIGSEGV", "signal SIGKILL, by the out-of-memory killer". */
export function describeExit(
  p: { readonly signalCode: string | number | null; readonly exitCode: number | null },
  oomBefore: number | null,
  oomAfter: number | null,
): string {
  if (!p.signalCode) return `exit code ${p.exitCode}`;
  const oom = oomBefore !== null && oomAfter !== null && oomAfter > oomBefore;
  return `signal ${p.signalCode}${oom ? ", by the out-of-memory killer" : ""}`;
}

/**
 * The OOM kills counted by this process's memory cgroup (v2 `memory.events`, v1
 * `memory.oom_control`), or null when the node does not say. A SIGKILL during which the count
 * rose was the OOM killer's: the one cause a user cannot otherwise tell from `kill -9`.
 */
export function oomKillCount(fsRoot: string): number | null {
  try {
    const lines = readFileSync(`${fsRoot}proc/self/cgroup`, "utf8").split("\n");
    for (const line of lines) {
      const [, controllers, path] = line.split(":");
      if (path === undefined) continue;
      const file =
        controllers === ""
          ? `${fsRoot}sys/fs/cgroup${path}/memory.events`
          : controllers?.split(",").includes("memory")
            ? `${fsRoot}sys/fs/cgroup/memory${path}/memory.oom_control`
            : null;
      if (file === null) continue;
      try {
        const match = /^oom_kill (\d+)$/m.exec(readFileSync(file, "utf8"));
        if (match) return Number(match[1]);
      } catch {
        // this hierarchy does not have it; try the next
      }
    }
  } catch {
    // no /proc: nothing to say
  }
  return null;
}
