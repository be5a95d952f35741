/**
 * A backend's explained ending ("OUT_OF_MEMORY: used 310 MiB of the 50 MiB asked for: ...")
 * is shown beside its reason without the reason again: `show`, the events table and `wait`
 * printed "FAILED (OUT_OF_MEMORY) - OUT_OF_MEMORY: used ...". Checked on the rendered text.
 */
import { afterEach, expect, test } from "bun:test";
import { createShowCommand } from "../../src/apps/cli/show.ts";
import { createWaitCommand } from "../../src/apps/cli/wait.ts";
import { type Harness, harness } from "../support/api-harness.ts";
import { captureIo, runtimeFor } from "../support/cli-runtime.ts";

let h: Harness;
afterEach(() => h?.close());

const EXPLAINED =
  "OUT_OF_MEMORY: used 310 MiB of the 50 MiB asked for: ask for more memory (profile with more memory: big-mem)";

/** The daemon's answers for one workload, as a backend that explained its OOM makes them. */
async function outOfMemoryRuntime() {
  h = harness({});
  const res = await h.post("/v1/workloads", {
    kind: "BATCH",
    profile: "interactive",
    command: ["x"],
  });
  const { id } = (await res.json()) as { id: string };
  const runtime = runtimeFor(h);
  const fetchReal = runtime.fetch;
  const ended = (body: Record<string, unknown>) => ({
    ...body,
    phase: "FAILED",
    reason: "OUT_OF_MEMORY",
    message: EXPLAINED,
  });
  (runtime as { fetch: typeof runtime.fetch }).fetch = async (url, init) => {
    const answer = await fetchReal(url, init);
    const body = (await answer.json()) as unknown;
    const changed = Array.isArray(body)
      ? [...body, ended({ at: "t", attempt: 1 })]
      : ended(body as Record<string, unknown>);
    return Response.json(changed, { status: answer.status });
  };
  return { id, runtime };
}

test("show, its events and wait say OUT_OF_MEMORY once", async () => {
  const { id, runtime } = await outOfMemoryRuntime();
  const shown = captureIo();
  expect(await createShowCommand(runtime).run([id], shown)).toBe(0);
  const waited = captureIo();
  expect(await createWaitCommand(runtime).run([id], waited)).toBe(1);
  const rendered = shown.out() + waited.out() + waited.err();
  expect(rendered).toContain("used 310 MiB of the 50 MiB asked for");
  expect(rendered).not.toMatch(/OUT_OF_MEMORY\)? *[-:]? *OUT_OF_MEMORY/);
  expect(rendered).not.toContain("OUT_OF_MEMORY: used");
});
