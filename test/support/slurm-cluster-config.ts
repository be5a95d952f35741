/**
 * Where the real test cluster is: OPENAI4S_SLURM_TEST_DIR names a directory prepared by
 * scripts/slurm-test-cluster.sh, whose `env` file exports SLURM_CONF. Shared by the
 * real-cluster tests and bench/slurm.bench.ts; prints nothing.
 */
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";

export interface TestCluster {
  readonly dir: string;
  readonly slurmConf: string;
  /** PATH for the scheduler's commands. */
  readonly path: string;
}

export function loadTestCluster(
  env: Readonly<Record<string, string | undefined>>,
): TestCluster | null {
  const dir = env["OPENAI4S_SLURM_TEST_DIR"];
  if (dir === undefined || dir === "") return null;
  const envText = readFileSync(join(dir, "env"), "utf8");
  const slurmConf = /^export SLURM_CONF=(\S+)$/m.exec(envText)?.[1];
  if (slurmConf === undefined) throw new Error(`no SLURM_CONF in ${dir}/env`);
  return { dir: resolve(dir), slurmConf, path: "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin" };
}
