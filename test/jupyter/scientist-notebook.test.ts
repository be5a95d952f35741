/**
 * The scientist's notebook (test/fixtures/scientist.ipynb) run by nbclient directly against
 * the built daemon on the local backend, as a principal (issue 30): no Jupyter Server in
 * between, the kernel started and spoken to through /api/kernels and its websocket, the
 * input uploaded and the outputs downloaded through /api/contents. numpy and pandas, a PNG,
 * a process pool, 10 MB printed (whole in the file the truncation line names), a 90 s cell.
 * test/slurm/scientist-notebook.cluster.test.ts runs the same notebook on the Slurm cluster.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { type Daemon, ensureBuilt, freePort, startDaemon } from "../support/binary-daemon.ts";
import { runScientistNotebook, scientistNotebookMissing } from "../support/scientist-notebook.ts";

const missing = scientistNotebookMissing();
if (missing !== null) console.log(`skipping the scientist's notebook: ${missing}`);

describe.skipIf(missing !== null)("the scientist's notebook through nbclient, locally", () => {
  let d: Daemon;
  let port: number;
  let token: string;

  beforeAll(async () => {
    ensureBuilt();
    port = await freePort();
    d = await startDaemon({
      env: { PATH: `/usr/bin:/bin:${process.env["PATH"] ?? ""}` },
      args: ["--listen", `127.0.0.1:${port}`],
    });
    expect((await d.cli("principal", "add", "alice")).code).toBe(0);
    token = (await d.cli("token", "issue", "alice")).stdout.trim();
  }, 60_000);

  afterAll(async () => {
    await d?.stop();
  }, 40_000);

  test("runs end to end as alice, on the local backend", async () => {
    const run = await runScientistNotebook({
      url: `http://127.0.0.1:${port}`,
      token,
      kernel: "default",
      dir: d.dir,
    });
    console.log(`local: the scientist's notebook ran in ${(run.wallMs / 1000).toFixed(1)} s`);
    // The session was alice's, not the admin's.
    const workload = (await d.show(run.directory)) as unknown as { owner: string | null };
    expect(workload.owner).toBe("alice");
  }, 240_000);
});
