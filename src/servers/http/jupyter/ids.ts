/**
 * Kernel ids are workload ids in the shape Jupyter Server routes accept: its handlers match
 * `\w+-\w+-\w+-\w+-\w+` (a UUID's five groups), and `w-` plus 20 base36 characters has two.
 * The mapping is a bijection on minted ids, so no table is kept and a daemon restart keeps
 * every kernel's id; any other workload id (tests inject their own) is its own kernel id.
 */
const MINTED = /^w-([0-9a-z]{5})([0-9a-z]{5})([0-9a-z]{5})([0-9a-z]{5})$/;
const KERNEL = /^w-([0-9a-z]{5})-([0-9a-z]{5})-([0-9a-z]{5})-([0-9a-z]{5})$/;

export function kernelIdOf(workloadId: string): string {
  const m = MINTED.exec(workloadId);
  return m ? `w-${m[1]}-${m[2]}-${m[3]}-${m[4]}` : workloadId;
}

export function workloadIdOf(kernelId: string): string {
  const m = KERNEL.exec(kernelId);
  return m ? `w-${m[1]}${m[2]}${m[3]}${m[4]}` : kernelId;
}
