/**
 * Sessions as scientists use them, through the built binary on the local backend with
 * bubblewrap: output streamed to the CLI as it is printed, interrupt with the kernel's state
 * intact, a disconnected client's cell left running and re-attached by its id, a matplotlib
 * figure as image/png, a kernel death seen at once and repaired without an exec, and (issue
 * 23) cells with their own timeoutSeconds, interrupts that escalate to a restart, restart.
 *
 * The kernel's interpreter is Debian's python3 (PATH puts /usr/bin first for the daemon): it
 * is the one with python3-matplotlib, which the CI installs.
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { stateLayout } from "../../src/core/layout.ts";
import { certificateFingerprint, readGatewayFingerprint } from "../../src/wire/gateway-tls.ts";
import {
  BINARY,
  condition,
  type Daemon,
  ensureBuilt,
  startDaemon,
} from "../support/binary-daemon.ts";
import { eventually } from "../support/eventually.ts";
import { tempDir } from "../support/temp-dir.ts";

const TIMEOUT_MS = 60_000;
const INTERRUPT_GRACE_MS = 1000;

beforeAll(() => {
  ensureBuilt();
}, 120_000);

/** `promise`, or a failure naming `what` once `ms` passed without it. */
function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} (after ${ms} ms)`)), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

describe("live sessions through the binary", () => {
  let d: Daemon;
  let id: string;

  async function startSession(): Promise<string> {
    const r = await d.cli("session", "start");
    if (r.code !== 0) throw new Error(`session start failed: ${r.stderr}\n${d.log()}`);
    const started = r.stdout.trim().split(/\s+/).at(-1)!;
    const w = await d.cli("wait", started, "--until", "READY", "--timeout", "40s");
    if (w.code !== 0) throw new Error(`not READY: ${w.stdout}${w.stderr}\n${d.log()}`);
    return started;
  }

  async function endSession(ending: string): Promise<void> {
    await d.cli("cancel", ending);
    await d.cli("wait", ending, "--until", "TERMINAL", "--timeout", "20s");
  }

  async function bringUp(): Promise<void> {
    d = await startDaemon({
      env: {
        PATH: `/usr/bin:/bin:${process.env["PATH"] ?? ""}`,
        OPENAI4S_INTERRUPT_GRACE_MS: String(INTERRUPT_GRACE_MS),
      },
    });
    id = await startSession();
  }

  beforeAll(bringUp, 60_000);

  // One test that leaves a cell running (a lost interrupt, a failed assertion mid-test) must
  // cost that test only: the later ones would queue behind the endless cell and time out
  // too. Interrupt until idle; a kernel that will not come back is replaced by a new session.
  afterEach(async () => {
    if (d.proc.exitCode !== null || d.proc.signalCode !== null) {
      console.log("the daemon is gone after the test: a fresh one for the next test");
      await d.stop();
      await bringUp();
      return;
    }
    const idle = await eventually(
      async () => (await d.cli("interrupt", id)).stdout === "nothing was running\n",
      { timeoutMs: 10_000 },
    ).catch(() => false);
    if (idle) return;
    console.log("the session stayed busy after the test: a fresh session for the next one");
    await endSession(id);
    id = await startSession();
  }, 90_000);

  afterAll(async () => {
    if (id) await endSession(id);
    await d?.stop();
  }, 40_000);

  test("the worker channel is TLS by default: a generated private key, a pin beside the credential", async () => {
    const layout = stateLayout(d.stateDir);
    expect(statSync(layout.gatewayTlsKey).mode & 0o777).toBe(0o600);
    const fingerprint = certificateFingerprint(readFileSync(layout.gatewayTlsCert, "utf8"));
    const show = JSON.parse((await d.cli("show", id, "--json")).stdout) as {
      allocations: { id: string }[];
    };
    const allocationId = show.allocations.at(-1)!.id;
    const credentialDir = join(layout.allocationDir(id, allocationId), "credentials");
    expect(readGatewayFingerprint(credentialDir)).toEqual({ kind: "Pinned", fingerprint });
    expect(d.log()).toContain(fingerprint);
  });

  /** Starts `openai4s exec` and records when each stdout chunk arrived. */
  function spawnExec(code: string, ...flags: string[]) {
    const started = performance.now();
    const p = Bun.spawn([BINARY, "exec", id, code, ...flags], {
      env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin", OPENAI4S_SERVER: `unix:${d.socket}` },
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
    });
    const chunks: { readonly atMs: number; readonly text: string }[] = [];
    const stdout = (async () => {
      const decoder = new TextDecoder();
      for await (const chunk of p.stdout) {
        chunks.push({ atMs: performance.now() - started, text: decoder.decode(chunk) });
      }
    })();
    const stderr = new Response(p.stderr).text();
    return {
      proc: p,
      chunks,
      async done() {
        const [code] = await Promise.all([p.exited, stdout]);
        return { code, stdout: chunks.map((c) => c.text).join(""), stderr: await stderr };
      },
    };
  }

  test(
    "a cell printing every 100 ms for 3 s streams its lines to the CLI as they come",
    async () => {
      const run = spawnExec(
        "import time\nfor i in range(30):\n    print('line', i)\n    time.sleep(0.1)",
      );
      const r = await run.done();
      expect(r.code).toBe(0);
      expect(r.stdout).toBe(Array.from({ length: 30 }, (_, i) => `line ${i}\n`).join(""));
      const first = run.chunks[0]!;
      const last = run.chunks.at(-1)!;
      // Not one burst at the end: the first line came long before the last.
      expect(first.text.startsWith("line 0\n")).toBe(true);
      expect(run.chunks.length).toBeGreaterThan(5);
      expect(last.atMs - first.atMs).toBeGreaterThan(1500);
      console.log(`streaming: first line after ${first.atMs.toFixed(0)} ms (CLI start included)`);
    },
    TIMEOUT_MS,
  );

  test(
    "interrupt stops `while True: pass` with KeyboardInterrupt; earlier variables stay",
    async () => {
      expect((await d.cli("exec", id, "kept = 'still here'")).code).toBe(0);
      const run = spawnExec("while True: pass");
      let answer = "";
      // The interrupt says whether a cell was running: repeat until the loop has started.
      await eventually(
        async () => {
          const r = await d.cli("interrupt", id);
          answer = r.stdout;
          return r.stdout === "interrupted\n";
        },
        { timeoutMs: 20_000 },
      );
      expect(answer).toBe("interrupted\n");
      const interruptedAt = performance.now();
      // Bounded below the test's timeout: a lost interrupt fails here, with the reason,
      // rather than by a timeout that also takes down the daemon the next tests need.
      const r = await within(run.done(), 20_000, "the loop still runs after `interrupted`");
      console.log(
        `interrupt: exec answered ${(performance.now() - interruptedAt).toFixed(0)} ms after`,
      );
      expect(r.code).toBe(1);
      expect(r.stderr).toContain("KeyboardInterrupt");
      const after = await d.cli("exec", id, "kept");
      expect(after.stdout).toBe("'still here'\n");
      expect((await d.cli("interrupt", id)).stdout).toBe("nothing was running\n");
    },
    TIMEOUT_MS,
  );

  test(
    "a client that disconnects leaves its cell running; another re-attaches by cell id after the last event it saw",
    async () => {
      // Streaming over HTTP: read until the third line, then drop the connection.
      const client = new AbortController();
      const res = await api(
        "POST",
        `/v1/workloads/${id}/exec`,
        {
          code: "import time\nfor i in range(20):\n    print('line', i, flush=True)\n    time.sleep(0.1)\n'end'",
        },
        "text/event-stream",
        client.signal,
      );
      const first = readEvents(res);
      await eventually(() => first.events.filter((e) => e.event === "stdout").length >= 3, {
        timeoutMs: 20_000,
      });
      client.abort();
      await first.done.catch(() => {});
      const seen = first.events;
      const cell = String(seen[0]?.data["cell"]);
      const lastId = seen.at(-1)!.id;
      expect(seen.map((e) => e.id)).toEqual(seen.map((_, i) => i + 1));
      // The cell ran on: the rest comes back, in order, nothing twice and nothing missing.
      const again = readEvents(
        await api("GET", `/v1/workloads/${id}/cells/${cell}/events?after=${lastId}`),
      );
      await within(again.done, 20_000, "the re-attached stream did not end");
      const all = [...seen, ...again.events];
      expect(all.map((e) => e.id)).toEqual(all.map((_, i) => i + 1));
      const text = all.map((e) => (e.event === "stdout" ? String(e.data["text"]) : "")).join("");
      expect(text).toBe(Array.from({ length: 20 }, (_, i) => `line ${i}\n`).join(""));
      expect(all.at(-1)).toMatchObject({ event: "result", data: { cell, status: "OK" } });
      expect(all.every((e) => e.data["cell"] === cell)).toBe(true);

      // The plain JSON client of the CLI, killed mid-cell: the cell is not interrupted.
      const marker = "plain-disconnect";
      const workspace = stateLayout(d.stateDir).workspaceDir(id);
      const run = spawnExec(
        `import time\nopen(${JSON.stringify(`${marker}-started`)}, 'w').close()\ntime.sleep(1.5)\nopen(${JSON.stringify(`${marker}-finished`)}, 'w').close()`,
        "--json",
      );
      await eventually(() => existsSync(join(workspace, `${marker}-started`)), {
        timeoutMs: 20_000,
      });
      run.proc.kill("SIGKILL");
      await run.done();
      await eventually(() => existsSync(join(workspace, `${marker}-finished`)), {
        timeoutMs: 20_000,
      });
    },
    TIMEOUT_MS,
  );

  test(
    "a matplotlib figure comes back as image/png, saved by --save-images",
    async () => {
      using scratch = tempDir("o4s-images-");
      const dir = scratch.path;
      const r = await spawnExec(
        "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()",
        "--save-images",
        dir,
      ).done();
      expect(r.code).toBe(0);
      const files = readdirSync(dir);
      expect(files).toHaveLength(1);
      const path = join(dir, files[0]!);
      expect(r.stdout).toBe(`${path}\n`);
      expect(readFileSync(path).subarray(0, 4).toString("latin1")).toBe("\x89PNG");
      const json = JSON.parse(
        (
          await d.cli(
            "exec",
            id,
            "import matplotlib.pyplot as plt\nplt.figure()\nplt.plot([1])",
            "--json",
          )
        ).stdout,
      );
      expect(
        json.outputs.some(
          (o: { type: string; data?: Record<string, string> }) =>
            o.type === "display_data" && o.data?.["image/png"],
        ),
      ).toBe(true);
    },
    TIMEOUT_MS,
  );

  test(
    "os._exit(1) is seen at once; a fresh kernel starts by itself, READY returns, the next exec says state was lost",
    async () => {
      expect((await d.cli("exec", id, "lost = 1")).code).toBe(0);
      // The kernel dies on its own, idle, half a second after the exec answered: nothing but
      // the worker's watch can tell the daemon.
      const armed = await d.cli(
        "exec",
        id,
        "import os, threading\nthreading.Timer(0.5, lambda: os._exit(1)).start()",
      );
      expect(armed.code).toBe(0);
      const diesAt = Date.now() + 500;
      // Dead for a moment (KERNEL_DIED, FALSE), then replaced (KERNEL_RESTARTED, TRUE): a
      // pass may see either, and both say how the kernel died.
      const kernel = await eventually(
        async () => {
          const k = condition(await d.show(id), "KERNEL_RESPONSIVE");
          return k?.reason === "KERNEL_DIED" || k?.reason === "KERNEL_RESTARTED" ? k : null;
        },
        { timeoutMs: 15_000 },
      );
      const seenAfterMs = Date.now() - diesAt;
      console.log(`liveness: ${kernel.reason} seen ${seenAfterMs} ms after the death`);
      expect(kernel.message).toContain("exit code 1");
      expect(Date.parse(String(kernel.lastTransitionTime)) - diesAt).toBeLessThan(1000);
      // Issue 23: `wait --until READY` after a death blocked forever (nothing started a
      // fresh kernel until an exec came); the worker now restarts it by itself.
      const waited = await d.cli("wait", id, "--until", "READY", "--timeout", "20s");
      expect(waited.code).toBe(0);
      expect(condition(await d.show(id), "KERNEL_RESPONSIVE")).toMatchObject({
        status: "TRUE",
        reason: "KERNEL_RESTARTED",
      });

      const next = JSON.parse((await d.cli("exec", id, "lost", "--json")).stdout);
      expect(next).toMatchObject({ status: "ERROR", kernelRestarted: true });
      expect(next.error).toContain("NameError");
      const again = JSON.parse((await d.cli("exec", id, "1 + 1", "--json")).stdout);
      expect(again).toMatchObject({ status: "OK", output: "2", kernelRestarted: false });
    },
    TIMEOUT_MS,
  );

  /** Server-sent events of a response, gathered as they arrive; `done` when it ends. */
  function readEvents(res: Response) {
    const events: { id: number; event: string; data: Record<string, unknown> }[] = [];
    const done = (async () => {
      const decoder = new TextDecoder();
      let buffered = "";
      for await (const chunk of res.body!) {
        buffered += decoder.decode(chunk, { stream: true });
        let end = buffered.indexOf("\n\n");
        while (end >= 0) {
          const block = buffered.slice(0, end);
          buffered = buffered.slice(end + 2);
          const name = /^event: (.*)$/m.exec(block)?.[1];
          const data = /^data: (.*)$/m.exec(block)?.[1];
          const eventId = Number(/^id: (.*)$/m.exec(block)?.[1] ?? "0");
          if (name && data) events.push({ id: eventId, event: name, data: JSON.parse(data) });
          end = buffered.indexOf("\n\n");
        }
      }
    })();
    return { events, done };
  }

  /** A request to the daemon's API over its socket, as any HTTP client would send it. */
  function api(
    method: string,
    path: string,
    body?: unknown,
    accept?: string,
    signal?: AbortSignal,
  ) {
    return fetch(`http://localhost${path}`, {
      method,
      unix: d.socket,
      ...(signal !== undefined && { signal }),
      headers: {
        ...(body !== undefined && { "Content-Type": "application/json" }),
        ...(accept !== undefined && { Accept: accept }),
      },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    });
  }

  test(
    "a cell over its timeoutSeconds answers 200 ERROR CellTimeout with its output kept, and the kernel keeps its state",
    async () => {
      expect((await d.cli("exec", id, "kept = 'here'")).code).toBe(0);
      const res = await within(
        api("POST", `/v1/workloads/${id}/exec`, {
          code: "import time\nprint('before', flush=True)\nwhile True: time.sleep(0.05)",
          timeoutSeconds: 1,
        }),
        20_000,
        "the cell ran past its timeoutSeconds",
      );
      expect(res.status).toBe(200);
      const body = (await res.json()) as {
        status: string;
        output: string;
        outputs: { type: string; ename?: string; evalue?: string }[];
      };
      expect(body.status).toBe("ERROR");
      expect(body.output).toBe("before\n");
      expect(body.outputs.at(-1)).toMatchObject({ type: "error", ename: "CellTimeout" });
      expect(body.outputs.at(-1)?.evalue).toContain("timeoutSeconds (1 s)");
      // Interrupted, not restarted: the kernel's variables are still there.
      expect((await d.cli("exec", id, "kept")).stdout).toBe("'here'\n");
      const refused = await api("POST", `/v1/workloads/${id}/exec`, {
        code: "1",
        timeoutSeconds: 0,
      });
      expect(refused.status).toBe(400);
      expect(await refused.text()).toContain("timeoutSeconds");
    },
    TIMEOUT_MS,
  );

  test(
    "an interrupt that does not stop the cell restarts the kernel after the grace: the stream says so, READY stays",
    async () => {
      expect((await d.cli("exec", id, "kept = 'gone soon'")).code).toBe(0);
      const res = await api(
        "POST",
        `/v1/workloads/${id}/exec`,
        {
          code: "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nprint('deaf', flush=True)\nwhile True: pass",
        },
        "text/event-stream",
      );
      expect(res.status).toBe(200);
      const { events, done: reading } = readEvents(res);
      await eventually(() => events.some((e) => e.event === "stdout"), { timeoutMs: 20_000 });
      const interrupted = await api("POST", `/v1/workloads/${id}/interrupt`);
      expect(await interrupted.json()).toEqual({ interrupted: true });
      const startedAt = performance.now();
      await within(reading, 20_000, "the deaf cell's stream did not end");
      console.log(
        `escalation: stream ended ${(performance.now() - startedAt).toFixed(0)} ms after the interrupt (grace ${INTERRUPT_GRACE_MS} ms)`,
      );
      expect(events.find((e) => e.event === "kernel")?.data).toMatchObject({
        state: "restarting",
      });
      expect(events.at(-1)).toMatchObject({
        event: "error",
        data: { ename: "KernelRestarted" },
      });
      expect(String(events.at(-1)?.data["evalue"])).toContain("did not stop within 1 s");
      const w = await d.cli("wait", id, "--until", "READY", "--timeout", "20s");
      expect(w.code).toBe(0);
      const after = JSON.parse((await d.cli("exec", id, "kept", "--json")).stdout);
      expect(after.error).toContain("NameError");
    },
    TIMEOUT_MS,
  );

  test(
    "restart (API and CLI) gives a fresh kernel in the same allocation; a running cell is answered KernelRestarted",
    async () => {
      const before = await d.show(id);
      expect((await d.cli("exec", id, "x = 1")).code).toBe(0);
      const res = await api("POST", `/v1/workloads/${id}/restart`);
      expect(res.status).toBe(200);
      expect(await res.json()).toMatchObject({ running: true });
      expect((await d.cli("exec", id, "x")).stderr).toContain("NameError");

      const marker = "restart-running";
      const run = spawnExec(
        `open(${JSON.stringify(marker)}, 'w').close()\nimport time\ntime.sleep(600)`,
      );
      const workspace = stateLayout(d.stateDir).workspaceDir(id);
      await eventually(() => existsSync(join(workspace, marker)), { timeoutMs: 20_000 });
      const cli = await d.cli("restart", id);
      expect(cli).toMatchObject({ code: 0, stdout: "restarted: a fresh kernel is running\n" });
      const r = await within(run.done(), 20_000, "the running cell was not answered");
      expect(r.code).toBe(1);
      expect(r.stderr).toContain("KernelRestarted");
      // The same allocation: a kernel restart is not a new attempt.
      const after = await d.show(id);
      expect(after.allocations.map((a) => a.id)).toEqual(before.allocations.map((a) => a.id));
      expect((await d.cli("exec", id, "1 + 1")).stdout).toBe("2\n");
    },
    TIMEOUT_MS,
  );

  test(
    "past the output cap the stream says so while the cell runs, and the cell's last lines still arrive",
    async () => {
      const go = "cap-go";
      const workspace = stateLayout(d.stateDir).workspaceDir(id);
      const res = await api(
        "POST",
        `/v1/workloads/${id}/exec`,
        {
          code: `import os, time\nprint('x' * 150000, flush=True)\nwhile not os.path.exists(${JSON.stringify(go)}):\n    time.sleep(0.02)\nprint('summary: loss 0.01')`,
        },
        "text/event-stream",
      );
      const read = readEvents(res);
      const stdout = () =>
        read.events.map((e) => (e.event === "stdout" ? String(e.data["text"]) : "")).join("");
      // The cell waits for the go file: this note can only have come while it runs.
      await eventually(() => stdout().includes("the middle is left out"), { timeoutMs: 20_000 });
      writeFileSync(join(workspace, go), "");
      await within(read.done, 20_000, "the capped cell's stream did not end");
      expect(stdout().startsWith("x".repeat(100_000))).toBe(true);
      expect(stdout()).toContain("more characters not shown");
      expect(stdout().endsWith("summary: loss 0.01\n")).toBe(true);
      expect(read.events.at(-1)).toMatchObject({ event: "result", data: { status: "OK" } });
    },
    TIMEOUT_MS,
  );
});
