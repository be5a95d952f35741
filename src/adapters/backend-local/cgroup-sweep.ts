/**
 * Removes job cgroups of this daemon that no running job needs: a supervisor killed before
 * it removed its own, a job whose record was acknowledged and forgotten, a probe left by a
 * crash. A cgroup is kept only while its record is waiting for a supervisor or its
 * supervisor is alive with no exit recorded. Runs at start and when a job is forgotten; the
 * daemon's root goes with its last job cgroup.
 */
import type { Log } from "../../lib/log.ts";
import { cgroupOwnerToken } from "./array-records.ts";
import type { CgroupDriver } from "./cgroup-port.ts";
import { readJobSnapshot } from "./job-state.ts";
import { jobDir } from "./records.ts";
import { drainAndRemove } from "./supervisor-limits.ts";

export async function sweepJobCgroups(
  driver: CgroupDriver,
  backendDir: string,
  bootId: string,
  log: Log,
): Promise<number> {
  let removed = 0;
  for (const name of driver.jobNames()) {
    // An array element's cgroup (TOKEN.K) lives as long as its array's record says.
    if (!name.startsWith(".") && stillNeeded(backendDir, cgroupOwnerToken(name), bootId)) continue;
    await drainAndRemove(driver, driver.jobCgroup(name), log);
    removed += 1;
  }
  if (removed > 0) log.info("removed stale job cgroups", { removed, where: driver.where });
  try {
    // No job left: the daemon's root goes too (made again by the next job).
    driver.removeRoot();
  } catch (error) {
    log.warn("cannot remove this daemon's cgroup root", { error: String(error) });
  }
  return removed;
}

function stillNeeded(backendDir: string, token: string, bootId: string): boolean {
  try {
    const snapshot = readJobSnapshot(jobDir(backendDir, token), bootId);
    if (snapshot.kind === "Unclaimed") return true;
    return snapshot.kind === "Claimed" && snapshot.supervisorAlive && snapshot.exit === null;
  } catch {
    // An unreadable record is not proof the job is gone: keep its limits in place.
    return true;
  }
}
