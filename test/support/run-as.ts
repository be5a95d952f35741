import type { RunAs } from "../../src/core/sandbox.ts";

/** What the daemon would run jobs as in this test process: nobody as root, else null. */
export const TEST_RUN_AS: RunAs | null =
  process.getuid?.() === 0 ? { uid: 65534, gid: 65534, label: "nobody" } : null;
