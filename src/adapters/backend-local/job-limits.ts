/**
 * One job's limits: the figures its profile gives, how they are enforced on this machine,
 * the argv prefix that puts the job under them, and the sentence its ending gets when it hit
 * one. Pure: the supervisor (supervisor-limits.ts) creates and removes the cgroup.
 */
import { DEFAULT_PIDS_MAX, type ResourceProfile } from "../../core/models.ts";
import { formatBytes } from "../../core/reason-hints.ts";
import type { CgroupUsage } from "./cgroup-port.ts";
import { joinFiles } from "./cgroup-port.ts";
import type { LimitEnforcement } from "./limit-enforcement.ts";
import type { JobLimits } from "./records.ts";

const SHELL = "/bin/sh";
/**
 * Joins every hierarchy's cgroup, then execs the launch: the join happens before the job's
 * first instruction, so nothing it forks is ever outside. A failed join exits 126: a job
 * never runs unlimited because its cgroup went missing.
 */
const JOIN_SCRIPT =
  'while [ "$#" -gt 0 ] && [ "$1" != -- ]; do echo $$ > "$1" || exit 126; shift; done; shift; exec "$@"';

export function jobLimitsFor(
  token: string,
  profile: ResourceProfile,
  profiles: readonly ResourceProfile[],
  enforcement: LimitEnforcement,
): JobLimits {
  const mb = profile.resources.memoryMb;
  const cgroup = enforcement.kind === "Cgroup" ? enforcement.driver.jobCgroup(token) : null;
  return {
    profile: profile.name,
    memoryBytes: mb === null ? null : mb * 1024 * 1024,
    pidsMax: profile.pidsMax ?? DEFAULT_PIDS_MAX,
    cpus: profile.resources.cpus > 0 ? profile.resources.cpus : null,
    cgroup: cgroup === null ? null : { ...cgroup, dirs: [...cgroup.dirs] },
    rlimit: enforcement.kind === "Rlimit",
    moreMemoryProfile: moreMemoryProfile(profile, profiles),
  };
}

/** The smallest profile offering more memory than `profile`; null when none does. */
export function moreMemoryProfile(
  profile: ResourceProfile,
  profiles: readonly ResourceProfile[],
): string | null {
  const own = profile.resources.memoryMb;
  if (own === null) return null;
  let best: ResourceProfile | null = null;
  for (const p of profiles) {
    const mb = p.resources.memoryMb;
    if (p.name === profile.name || mb === null || mb <= own) continue;
    if (best === null || mb < (best.resources.memoryMb ?? Number.POSITIVE_INFINITY)) best = p;
  }
  return best?.name ?? null;
}

/**
 * `argv` under the limits: in the job's cgroup, or under prlimit (RLIMIT_NPROC, RLIMIT_AS).
 * Outermost, so the sandbox and the privilege drop are held too; limits survive exec and
 * setuid, and a root bwrap is exempt from RLIMIT_NPROC while the job's uid is not.
 */
export function limitArgv(
  limits: JobLimits | undefined,
  argv: readonly string[],
): readonly string[] {
  if (limits === undefined) return argv;
  if (limits.cgroup !== null) {
    return [
      SHELL,
      "-c",
      JOIN_SCRIPT,
      "openai4s-cgroup",
      ...joinFiles(limits.cgroup),
      "--",
      ...argv,
    ];
  }
  if (!limits.rlimit) return argv;
  const caps = [`--nproc=${limits.pidsMax}`];
  if (limits.memoryBytes !== null) caps.push(`--as=${limits.memoryBytes}`);
  return ["/usr/bin/prlimit", ...caps, "--", ...argv];
}

/**
 * The exit message of a job that hit its memory limit, in the form the API turns into a
 * hint ("OUT_OF_MEMORY: figures: what to do", reason-hints.ts), as a cluster job's is.
 */
export function outOfMemoryMessage(limits: JobLimits, usage: CgroupUsage): string {
  const asked = limits.memoryBytes === null ? null : formatBytes(limits.memoryBytes);
  const used =
    usage.peakMemoryBytes === null || asked === null
      ? `killed at its memory limit${asked === null ? "" : ` of ${asked}`}`
      : `used ${formatBytes(usage.peakMemoryBytes)} of the ${asked} asked for`;
  const advice =
    limits.moreMemoryProfile === null
      ? `no profile here has more memory than ${limits.profile}: use less, or ask an administrator`
      : `ask for more memory (profile with more memory: ${limits.moreMemoryProfile})`;
  return `OUT_OF_MEMORY: ${used} (profile ${limits.profile}): ${advice}`;
}

/** A note for an ending whose job was refused processes at its limit; "" when none. */
export function pidsNote(limits: JobLimits, usage: CgroupUsage): string {
  if (usage.pidsRefused === 0) return "";
  return ` (${usage.pidsRefused} process starts refused at its limit of ${limits.pidsMax} processes)`;
}
