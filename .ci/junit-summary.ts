/**
 * Reads bun's JUnit report and prints "passed failed skipped slurmRan slurmSkipped".
 * Slurm cluster tests: files named *.cluster.test.ts, or cases/suites named "slurm-cluster ...".
 */
const path = process.argv[2];
if (!path) throw new Error("usage: junit-summary.ts FILE");
const file = Bun.file(path);
if (!(await file.exists())) {
  console.log("0 1 0 0 0");
  process.exit(0);
}
const xml = await file.text();
let passed = 0;
let failed = 0;
let skipped = 0;
let slurmRan = 0;
let slurmSkipped = 0;
// Each <testcase ...> either self-closes or has children (<failure>, <skipped>).
const caseRe = /<testcase\b([^>]*?)(\/>|>([\s\S]*?)<\/testcase>)/g;
for (const match of xml.matchAll(caseRe)) {
  const attrs = match[1] ?? "";
  const body = match[3] ?? "";
  const name = /\bname="([^"]*)"/.exec(attrs)?.[1] ?? "";
  const classname = /\bclassname="([^"]*)"/.exec(attrs)?.[1] ?? "";
  const file = /\bfile="([^"]*)"/.exec(attrs)?.[1] ?? "";
  const isSlurm =
    /slurm-cluster/.test(name) ||
    /slurm-cluster/.test(classname) ||
    /\.cluster\.test\.ts$/.test(file);
  if (/<skipped\b/.test(body) || /<todo\b/.test(body)) {
    skipped++;
    if (isSlurm) slurmSkipped++;
  } else if (/<failure\b|<error\b/.test(body)) {
    failed++;
    if (isSlurm) slurmRan++;
  } else {
    passed++;
    if (isSlurm) slurmRan++;
  }
}
console.log(`${passed} ${failed} ${skipped} ${slurmRan} ${slurmSkipped}`);
