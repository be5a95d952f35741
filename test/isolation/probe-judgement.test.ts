/**
 * The probe's verdict from what it printed, one line at a time. The end-to-end tests in
 * bubblewrap.test.ts need a broken bwrap to show each check; these show that each line of a
 * passing probe is required (a missing line is never "absent") and that each identity field
 * is judged, not just the first.
 */
import { describe, expect, test } from "bun:test";
import { rmSync, writeFileSync } from "node:fs";
import {
  createProbeLayout,
  judgeProbe,
  type ProbeLayout,
} from "../../src/adapters/isolation-bwrap/probe.ts";
import { tempDirs } from "../support/temp-dir.ts";

const tempDir = tempDirs("o4s-probe-judge-", "each");

const NONE = "0000000000000000";

/** What a sandbox that holds prints, one field per line (the order the script prints). */
function passingLines(layout: ProbeLayout): string[] {
  return [
    `marker=${layout.marker}`,
    "canary=absent",
    "decoy=absent",
    "uid=65534 65534 65534 65534",
    ...["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"].map((set) => `${set}=${NONE}`),
    "nnp=1",
    "sensitive=checked",
    "shadow=absent",
    "write=ok",
  ];
}

/** A layout whose probe "wrote" its marker back, as a working sandbox does. */
function laidOut(): ProbeLayout {
  const layout = createProbeLayout(tempDir(), null);
  writeFileSync(layout.writtenPath, layout.marker);
  return layout;
}

function judge(layout: ProbeLayout, lines: readonly string[], decoyAlive = true) {
  return judgeProbe(
    layout,
    { exitCode: 0, stdout: `${lines.join("\n")}\n`, stderr: "", decoyAlive },
    "test",
  );
}

function problemsOf(verdict: ReturnType<typeof judge>): string {
  expect(verdict.kind).toBe("Unverified");
  return verdict.kind === "Unverified" ? verdict.message : "";
}

describe("judging the isolation probe's output", () => {
  test("a probe that printed every expected line is Verified", () => {
    const layout = laidOut();
    expect(judge(layout, passingLines(layout))).toEqual({ kind: "Verified", mechanism: "test" });
  });

  test.each([
    ["real", "uid=0 65534 65534 65534"],
    ["effective", "uid=65534 0 65534 65534"],
    ["saved", "uid=65534 65534 0 65534"],
    ["filesystem", "uid=65534 65534 65534 0"],
  ])("a probe whose %s uid is 0 is Unverified", (_which, uidLine) => {
    const layout = laidOut();
    const lines = passingLines(layout).map((l) => (l.startsWith("uid=") ? uidLine : l));
    expect(problemsOf(judge(layout, lines))).toContain("the probe ran as uid 0");
  });

  test.each([
    ["canary", "a sibling allocation's credential directory was visible"],
    ["decoy", "a sibling process was visible"],
    ["shadow", "/etc/shadow existed for the probe"],
    ["nnp", "the probe could gain privileges"],
    ["uid", "the probe's uid could not be read"],
    ["CapEff", "the probe kept capabilities (CapEff unknown)"],
    ["sensitive", "the probe never reported its check of /proc/sys and /sys"],
  ])("a probe that never printed its %s= line is Unverified, not 'absent'", (key, problem) => {
    const layout = laidOut();
    const lines = passingLines(layout).filter((l) => !l.startsWith(`${key}=`));
    expect(problemsOf(judge(layout, lines))).toContain(problem);
  });

  test.each([
    "/proc/sys/kernel/core_pattern",
    "/proc/sys/kernel/modprobe",
    "/proc/sys/vm/drop_caches",
    "/proc/sysrq-trigger",
    "/sys/kernel/uevent_helper",
    "/sys/kernel/mm/transparent_hugepage/enabled",
  ])("one writable sensitive file (%s) alone is Unverified, naming it", (path) => {
    const layout = laidOut();
    const lines = [...passingLines(layout), `writable=${path}`];
    expect(problemsOf(judge(layout, lines))).toContain(`the probe could write ${path}`);
  });

  test("'absent' means nothing once the canary itself is gone", () => {
    // A probe (or anything else) that removed the canary would see it absent from inside
    // even with B's credential directory bound in.
    const layout = laidOut();
    rmSync(layout.canaryPath);
    expect(problemsOf(judge(layout, passingLines(layout)))).toContain(
      "the canary vanished during the probe",
    );
  });

  test("'absent' means nothing once the decoy process has exited", () => {
    const layout = laidOut();
    expect(problemsOf(judge(layout, passingLines(layout), false))).toContain(
      "the decoy exited during the probe",
    );
  });
});
