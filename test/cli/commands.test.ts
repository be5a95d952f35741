import { afterEach, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import {
  applyTransition,
  getWorkload,
  mintAttempt,
  setCondition,
} from "../../src/adapters/store-sqlite/index.ts";
import { createCancelCommand } from "../../src/apps/cli/cancel.ts";
import { createExecCommand } from "../../src/apps/cli/exec.ts";
import { createInterruptCommand } from "../../src/apps/cli/interrupt.ts";
import { createListCommand } from "../../src/apps/cli/list.ts";
import { createProfilesCommand } from "../../src/apps/cli/profiles.ts";
import { createSessionCommand } from "../../src/apps/cli/session.ts";
import { createShowCommand } from "../../src/apps/cli/show.ts";
import { createSubmitCommand } from "../../src/apps/cli/submit.ts";
import { createWaitCommand } from "../../src/apps/cli/wait.ts";
import { externalHandle, mintSubmissionToken } from "../../src/core/models.ts";
import type { ExecOutcome } from "../../src/core/session/session-port.ts";
import { UsageError } from "../../src/lib/command/command.ts";
import { type Harness, harness } from "../support/api-harness.ts";
import { captureIo, runtimeFor } from "../support/cli-runtime.ts";
import { fakeBackend } from "../support/fake-backend.ts";
import { tempDir } from "../support/temp-dir.ts";

const open: Harness[] = [];
function make(options: Parameters<typeof harness>[0] = {}): Harness {
  const h = harness(options);
  open.push(h);
  return h;
}
afterEach(() => {
  for (const h of open.splice(0)) h.close();
});

const verified = () =>
  fakeBackend({
    capabilities: {
      sessionIsolation: {
        verifySessionIsolation: async () => ({ kind: "Verified", mechanism: "test" }),
      },
    },
  });

async function usage(run: () => Promise<number>): Promise<string> {
  try {
    await run();
  } catch (error) {
    expect(error).toBeInstanceOf(UsageError);
    return (error as Error).message;
  }
  throw new Error("expected a usage error");
}

function toRunning(h: Harness, id: string) {
  const allocationId = `a-${id}`;
  mintAttempt(h.store, {
    workloadId: id,
    allocationId,
    token: mintSubmissionToken((n) => crypto.getRandomValues(new Uint8Array(n))),
    expectedEpoch: 0,
    message: "submitting",
  });
  applyTransition(h.store, {
    allocation: {
      id: allocationId,
      expectedPhase: "SUBMITTING",
      phase: "RUNNING",
      reason: "STARTED",
      message: null,
      handle: externalHandle("1"),
      startedAt: h.clock.now(),
      deadlineAt: h.clock.now() + 3_723_000,
    },
    workload: {
      id,
      expectedPhase: "SUBMITTING",
      expectedEpoch: 1,
      phase: "RUNNING",
      reason: "STARTED",
      message: "running",
    },
  });
  return allocationId;
}

function toTerminal(h: Harness, id: string, phase: "COMPLETED" | "FAILED", allocationId: string) {
  applyTransition(h.store, {
    allocation: {
      id: allocationId,
      expectedPhase: "RUNNING",
      phase,
      reason: phase === "COMPLETED" ? "EXITED_ZERO" : "NONZERO_EXIT",
      message: null,
    },
    workload: {
      id,
      expectedPhase: "RUNNING",
      expectedEpoch: 1,
      phase,
      reason: phase === "COMPLETED" ? "EXITED_ZERO" : "NONZERO_EXIT",
      message: phase === "COMPLETED" ? "exit 0" : "exit 3",
      exitCode: phase === "COMPLETED" ? 0 : 3,
    },
  });
}

describe("submit", () => {
  test("prints the id; flags become the request; the default profile is picked", async () => {
    const h = make();
    const runtime = runtimeFor(h);
    const io = captureIo();
    const code = await createSubmitCommand(runtime).run(
      [
        "--name",
        "hello",
        "--time-limit",
        "59m30s",
        "--env",
        "A=1",
        "--env",
        "B=x=y",
        "--max-attempts",
        "2",
        "--idempotency-key",
        "k1",
        "--",
        "echo",
        "--not-a-flag",
      ],
      io,
    );
    expect(io.err()).toBe("");
    expect(code).toBe(0);
    const id = io.out().trim();
    expect(id).toMatch(/^w-/);
    const w = getWorkload(h.store, id);
    expect(w).toMatchObject({
      name: "hello",
      profile: "default",
      maxAttempts: 2,
      idempotencyKey: "k1",
      spec: {
        command: ["echo", "--not-a-flag"],
        env: { A: "1", B: "x=y" },
        timeLimitSeconds: 3570,
      },
    });
    // Same key again: same id, exit 0.
    const again = captureIo();
    await createSubmitCommand(runtime).run(
      [
        "--name",
        "hello",
        "--time-limit",
        "59m30s",
        "--env",
        "A=1",
        "--env",
        "B=x=y",
        "--max-attempts",
        "2",
        "--idempotency-key",
        "k1",
        "--",
        "echo",
        "--not-a-flag",
      ],
      again,
    );
    expect(again.out().trim()).toBe(id);
  });

  test("--array and --max-concurrent reach the request; the server's refusal is shown", async () => {
    const h = make();
    const io = captureIo();
    // The harness's profiles run no arrays: what comes back names the field and the profile.
    const code = await createSubmitCommand(runtimeFor(h)).run(
      ["--array", "3", "--max-concurrent", "2", "--", "true"],
      io,
    );
    // 2: the request was refused (as for any invalid field), with the server's reason.
    expect(code).toBe(2);
    expect(io.err()).toContain('profile "default" does not run job arrays');
    const bad = captureIo();
    await expect(
      createSubmitCommand(runtimeFor(h)).run(["--array", "x", "--", "true"], bad),
    ).rejects.toThrow("--array");
  });

  test("--cpus, --mem and --gpus reach the request as resources; over the profile's bound is its refusal", async () => {
    const h = make();
    const io = captureIo();
    const code = await createSubmitCommand(runtimeFor(h)).run(
      ["--cpus", "1", "--mem", "2G", "--", "true"],
      io,
    );
    expect(io.err()).toBe("");
    expect(code).toBe(0);
    expect(getWorkload(h.store, io.out().trim())?.spec.resources).toEqual({
      cpus: 1,
      memoryMb: 2048,
    });
    // The harness's default profile: 2 CPUs and no GPUs, no maxima.
    const over = captureIo();
    expect(
      await createSubmitCommand(runtimeFor(h)).run(
        ["--cpus", "3", "--gpus", "1", "--", "true"],
        over,
      ),
    ).toBe(2);
    expect(over.err()).toContain(
      'resources.cpus: profile "default" allows at most 2 CPUs per node (asked 3)',
    );
    expect(over.err()).toContain(
      'resources.gpus: profile "default" allows at most 0 GPUs per node (asked 1)',
    );
  });

  test("--json prints the API body", async () => {
    const h = make();
    const io = captureIo();
    expect(await createSubmitCommand(runtimeFor(h)).run(["--json", "--", "true"], io)).toBe(0);
    expect(JSON.parse(io.out())).toMatchObject({ kind: "BATCH", phase: "PENDING" });
  });

  test.each([
    [["--time-limit", "1.5h", "--", "x"], "--time-limit"],
    [["--time-limit", "0", "--", "x"], "--time-limit"],
    [["--env", "NOEQUALS", "--", "x"], "--env"],
    [["--max-attempts", "lots", "--", "x"], "--max-attempts"],
    [["--mem", "1.5G", "--", "x"], "--mem"],
    [["--cpus", "0", "--", "x"], "--cpus"],
    [["--gpus", "two", "--", "x"], "--gpus"],
    [["--bogus", "--", "x"], "--bogus"],
    [[], "command"],
  ])("%p is a usage error naming %s; nothing is sent", async (args, named) => {
    const h = make();
    const runtime = runtimeFor(h);
    const message = await usage(() => createSubmitCommand(runtime).run(args, captureIo()));
    expect(message).toContain(named);
    expect(runtime.requests).toEqual([]);
  });

  test("the daemon's 400 is rendered with the field and exits 2", async () => {
    const h = make();
    const io = captureIo();
    const code = await createSubmitCommand(runtimeFor(h)).run(["--profile", "nope", "--", "x"], io);
    expect(code).toBe(2);
    expect(io.err()).toContain("profile: unknown profile");
    expect(h.rows().workloads).toBe(0);
  });

  test("an unreachable daemon: exit 1 naming the socket", async () => {
    const h = make();
    const runtime = {
      ...runtimeFor(h),
      fetch: async () => {
        throw new Error("ENOENT");
      },
    };
    const io = captureIo();
    expect(
      await createSubmitCommand(runtime).run(["--server", "unix:/nowhere.sock", "--", "x"], io),
    ).toBe(1);
    expect(io.err()).toContain("unix:/nowhere.sock");
  });
});

describe("session start and exec", () => {
  test("session start posts a SESSION with the idle timeout and the memory asked", async () => {
    const h = make({ backend: verified() });
    const io = captureIo();
    const code = await createSessionCommand(runtimeFor(h)).run(
      ["start", "--idle-timeout", "15m", "--name", "nb", "--mem", "512M"],
      io,
    );
    expect(code).toBe(0);
    const w = getWorkload(h.store, io.out().trim());
    expect(w).toMatchObject({ kind: "SESSION", profile: "interactive", name: "nb" });
    expect(w?.spec.idleTimeoutSeconds).toBe(900);
    expect(w?.spec.resources).toEqual({ memoryMb: 512 });
  });

  test("the isolation refusal reaches the user with its reason; exit 1", async () => {
    const h = make();
    const io = captureIo();
    expect(await createSessionCommand(runtimeFor(h)).run(["start"], io)).toBe(1);
    expect(io.err()).toContain("reason: ISOLATION_UNAVAILABLE");
  });

  test("usage: an action is required; --idle-timeout must be a duration", async () => {
    const h = make();
    expect(await usage(() => createSessionCommand(runtimeFor(h)).run([], captureIo()))).toContain(
      "session start",
    );
    expect(
      await usage(() => createSessionCommand(runtimeFor(h)).run(["stop"], captureIo())),
    ).toContain('"stop"');
    expect(
      await usage(() =>
        createSessionCommand(runtimeFor(h)).run(["start", "--idle-timeout", "soon"], captureIo()),
      ),
    ).toContain("--idle-timeout");
  });

  test("exec streams the output; an ERROR exits 1 with the error on stderr", async () => {
    const png = Buffer.from("\x89PNG not really", "latin1");
    let answer: ExecOutcome = {
      kind: "Ok",
      status: "OK",
      output: "hi\n2",
      error: null,
      outputs: [
        { type: "stream", name: "stdout", text: "partial" },
        { type: "stream", name: "stderr", text: "warn\n" },
        {
          type: "display_data",
          data: { "text/plain": "<Figure>", "image/png": png.toString("base64") },
        },
        { type: "execute_result", data: { "text/plain": "2" } },
      ],
      kernelRestarted: true,
    };
    const h = make({
      backend: verified(),
      sessions: {
        // As the real service: each output to the listener, then the outcome.
        exec: async (_id, _code, options) => {
          options?.onStart?.();
          if (answer.kind === "Ok") for (const o of answer.outputs) options?.onOutput?.(o);
          return answer;
        },
        interrupt: async () => ({ kind: "Ok", interrupted: true }),
        restart: async () => ({ kind: "Ok", running: true, message: "the interpreter is running" }),
      },
    });
    const sid = (
      (await (
        await h.post("/v1/workloads", { kind: "SESSION", profile: "interactive" })
      ).json()) as {
        id: string;
      }
    ).id;
    const io = captureIo();
    expect(await createExecCommand(runtimeFor(h)).run([sid, "1+1"], io)).toBe(0);
    // The figure's text stands on its own line after unterminated output; the value too.
    expect(io.out()).toBe("partial\n<Figure>\n2\n");
    expect(io.err()).toContain("warn\n");
    expect(io.err()).toContain("earlier variables are gone");

    using scratch = tempDir("o4s-images-");
    const dir = scratch.path;
    const io3 = captureIo();
    expect(
      await createExecCommand(runtimeFor(h)).run([sid, "1+1", "--save-images", dir], io3),
    ).toBe(0);
    const saved = io3.out().split("\n")[1]!;
    expect(saved.startsWith(dir)).toBe(true);
    expect(readFileSync(saved)).toEqual(png);

    answer = {
      kind: "Ok",
      status: "ERROR",
      output: "",
      error: "ZeroDivisionError",
      outputs: [
        { type: "error", ename: "ZeroDivisionError", evalue: "", traceback: "ZeroDivisionError" },
      ],
      kernelRestarted: false,
    };
    const io2 = captureIo();
    expect(await createExecCommand(runtimeFor(h)).run([sid, "1/0"], io2)).toBe(1);
    expect(io2.err()).toBe("ZeroDivisionError\n");
    expect(await usage(() => createExecCommand(runtimeFor(h)).run([sid], captureIo()))).toContain(
      "ID CODE",
    );

    const io4 = captureIo();
    expect(await createInterruptCommand(runtimeFor(h)).run([sid], io4)).toBe(0);
    expect(io4.out()).toBe("interrupted\n");
  });
});

/** A backend whose scheduler dry run refuses `profile`, saying `detail` (at time 0). */
function refusingDryRun(profile: string, detail: string) {
  return fakeBackend({
    diagnostics: async () => ({
      backend: "fake",
      healthy: true,
      message: "fine",
      calls: {},
      profileChecks: [
        {
          profile,
          outcome: "IMPOSSIBLE",
          detail,
          publicDetail: "hidden form",
          checkedAt: 0,
          since: 0,
        },
      ],
    }),
  });
}

describe("list, show, cancel, profiles", () => {
  test("list shows a table; --all follows pages; --json is the API body", async () => {
    const h = make();
    for (let i = 0; i < 3; i++) {
      await h.post("/v1/workloads", {
        kind: "BATCH",
        profile: "default",
        command: ["true"],
        name: `j${i}`,
      });
      h.clock.advance(1);
    }
    const io = captureIo();
    expect(await createListCommand(runtimeFor(h)).run(["--limit", "2"], io)).toBe(0);
    const lines = io.out().trim().split("\n");
    expect(lines[0]).toMatch(/^ID\s+KIND\s+PHASE/);
    expect(lines).toHaveLength(3);
    expect(io.err()).toContain("--all");
    const all = captureIo();
    await createListCommand(runtimeFor(h)).run(["--limit", "2", "--all", "--json"], all);
    const body = JSON.parse(all.out()) as { items: { name: string }[]; nextCursor: null };
    expect(body.items.map((i) => i.name)).toEqual(["j2", "j1", "j0"]);
    expect(body.nextCursor).toBeNull();
    const bad = captureIo();
    expect(await createListCommand(runtimeFor(h)).run(["--phase", "DONE"], bad)).toBe(2);
    expect(bad.err()).toContain("phase");
  });

  test("show names what a workload asked in place of its profile's defaults, and nothing when none", async () => {
    const h = make();
    const post = async (body: Record<string, unknown>) =>
      ((await (await h.post("/v1/workloads", body)).json()) as { id: string }).id;
    const batch = { kind: "BATCH", profile: "default", command: ["true"] };
    const asked = await post({ ...batch, resources: { cpus: 1, memoryMb: 300 } });
    const io = captureIo();
    expect(await createShowCommand(runtimeFor(h)).run([asked], io)).toBe(0);
    expect(io.out()).toContain("Asked:       1 CPU, 300 MB per node");
    const plain = captureIo();
    expect(await createShowCommand(runtimeFor(h)).run([await post(batch)], plain)).toBe(0);
    expect(plain.out()).not.toContain("Asked:");
  });

  test("show renders the workload with allocations and events; unknown id exits 1", async () => {
    const h = make();
    const id = (
      (await (
        await h.post("/v1/workloads", { kind: "BATCH", profile: "default", command: ["true"] })
      ).json()) as { id: string }
    ).id;
    toRunning(h, id);
    const io = captureIo();
    expect(await createShowCommand(runtimeFor(h)).run([id], io)).toBe(0);
    expect(io.out()).toContain(`ID:          ${id}`);
    expect(io.out()).toContain("Phase:       RUNNING (STARTED)");
    // TIME_REMAINING: the deadline the backend reported, and what is left of it.
    expect(io.out()).toContain(
      `Deadline:    ${new Date(h.clock.now() + 3_723_000).toISOString()} (1h02m03s left)`,
    );
    expect(io.out()).toContain("Allocations:");
    // The backend's own job id, to find the attempt in the backend's tools.
    expect(io.out()).toMatch(/EPOCH\s+ID\s+BACKEND JOB\s+PHASE/);
    expect(io.out()).toMatch(/\n1\s+\S+\s+1\s+RUNNING/);
    // No reconciler here has heard the backend: the view says so rather than look fresh.
    expect(io.out()).toContain("Confirmed:   not by the backend since the daemon started");
    expect(io.out()).toContain("Events:");
    // And back: the backend's job id finds the workload.
    const found = captureIo();
    await createListCommand(runtimeFor(h)).run(["--backend-job-id", "1", "--json"], found);
    expect((JSON.parse(found.out()) as { items: { id: string }[] }).items.map((i) => i.id)).toEqual(
      [id],
    );
    const none = captureIo();
    await createListCommand(runtimeFor(h)).run(["--backend-job-id", "2", "--json"], none);
    expect((JSON.parse(none.out()) as { items: unknown[] }).items).toEqual([]);
    const missing = captureIo();
    expect(await createShowCommand(runtimeFor(h)).run(["w-none"], missing)).toBe(1);
    expect(missing.err()).toContain("w-none");
    expect(await usage(() => createShowCommand(runtimeFor(h)).run([], captureIo()))).toContain(
      "ID",
    );
  });

  test("cancel is idempotent", async () => {
    const h = make();
    const id = (
      (await (
        await h.post("/v1/workloads", { kind: "BATCH", profile: "default", command: ["true"] })
      ).json()) as { id: string }
    ).id;
    for (let i = 0; i < 2; i++) {
      const io = captureIo();
      expect(await createCancelCommand(runtimeFor(h)).run([id], io)).toBe(0);
      expect(io.out()).toContain(`cancel requested: ${id}`);
    }
    expect(getWorkload(h.store, id)?.desired.kind).toBe("STOP");
  });

  test("profiles prints the public view", async () => {
    const h = make();
    const io = captureIo();
    expect(await createProfilesCommand(runtimeFor(h)).run([], io)).toBe(0);
    expect(io.out()).toContain("default");
    expect(io.out()).toContain("1h");
    expect(io.out()).toContain("1024 MB");
  });

  test("profiles names a degraded profile with the scheduler's words", async () => {
    const said = "sbatch: error: Batch job submission failed: Invalid partition name specified";
    const backend = refusingDryRun("default", said);
    const h = make({ backend });
    const io = captureIo();
    expect(await createProfilesCommand(runtimeFor(h)).run([], io)).toBe(0);
    expect(io.out()).toContain(
      `default is degraded (SCHEDULER_REFUSES) since 1970-01-01T00:00:00.000Z: ${said}\n`,
    );
    expect(io.out()).not.toContain("interactive is degraded");
  });

  test("a degraded profile's other reason to place nothing is still said, its own once", async () => {
    const backend = refusingDryRun(
      "interactive",
      "sbatch: error: Invalid partition name specified",
    );
    const io = captureIo();
    expect(await createProfilesCommand(runtimeFor(make({ backend }))).run([], io)).toBe(0);
    // Its sessions cannot be isolated here (the fake backend): that line stays.
    expect(io.out()).toContain("SESSION* cannot be placed now (ISOLATION_UNAVAILABLE)");
    // Its refusal is the degraded line, not a second "cannot be placed now".
    expect(io.out()).toContain("interactive is degraded (SCHEDULER_REFUSES)");
    expect(io.out()).not.toContain("cannot be placed now (SCHEDULER_REFUSES)");
  });

  test("profiles shows how far a workload may raise each default", async () => {
    const roomy = {
      name: "roomy",
      description: "Defaults and maxima",
      kinds: ["BATCH"],
      resources: { nodes: 1, cpus: 1, gpus: 0, memoryMb: 500, timeLimitSeconds: 600 },
      maxima: { cpus: 8, memoryMb: 4000, timeLimitSeconds: 3600 },
    } as const;
    const h = make({ backend: fakeBackend({ profiles: () => [roomy] }) });
    const io = captureIo();
    expect(await createProfilesCommand(runtimeFor(h)).run([], io)).toBe(0);
    const row =
      io
        .out()
        .split("\n")
        .find((line) => line.startsWith("roomy")) ?? "";
    expect(row).toContain("1 (max 8)");
    expect(row).toContain("500 MB (max 4000 MB)");
    expect(row).toContain("10m (max 1h)");
  });
});

describe("wait", () => {
  async function batch(h: Harness): Promise<string> {
    const res = await h.post("/v1/workloads", {
      kind: "BATCH",
      profile: "default",
      command: ["true"],
    });
    return ((await res.json()) as { id: string }).id;
  }

  test("TERMINAL: one plain line per change, exit 0 when COMPLETED", async () => {
    const h = make();
    const id = await batch(h);
    const runtime = runtimeFor(h);
    let polls = 0;
    let allocationId = "";
    runtime.onSleep = () => {
      polls += 1;
      if (polls === 2) allocationId = toRunning(h, id);
      if (polls === 4) toTerminal(h, id, "COMPLETED", allocationId);
    };
    const io = captureIo();
    expect(await createWaitCommand(runtime).run([id], io)).toBe(0);
    const lines = io.out().trim().split("\n");
    expect(lines.map((l) => l.split(" ")[2])).toEqual(["PENDING", "RUNNING", "COMPLETED"]);
  });

  test("TERMINAL: a FAILED job exits with its own exit code (as sbatch --wait) and says how it ended", async () => {
    const h = make();
    const id = await batch(h);
    const a = toRunning(h, id);
    toTerminal(h, id, "FAILED", a);
    const io = captureIo();
    expect(await createWaitCommand(runtimeFor(h)).run([id], io)).toBe(3);
    expect(io.err()).toContain("ended FAILED (NONZERO_EXIT): exit 3");
  });

  test("READY for a BATCH is RUNNING; a live status line on a terminal", async () => {
    const h = make();
    const id = await batch(h);
    const runtime = runtimeFor(h, { tty: true });
    runtime.onSleep = () => {
      toRunning(h, id);
    };
    const io = captureIo();
    expect(await createWaitCommand(runtime).run([id, "--until", "ready"], io)).toBe(0);
    expect(io.out()).toContain("\r\x1b[2K");
    expect(io.out().endsWith("\n")).toBe(true);
  });

  test("READY for a SESSION is its READY condition", async () => {
    const h = make({ backend: verified() });
    const id = (
      (await (
        await h.post("/v1/workloads", { kind: "SESSION", profile: "interactive" })
      ).json()) as { id: string }
    ).id;
    const runtime = runtimeFor(h);
    runtime.onSleep = () => {
      toRunning(h, id);
      setCondition(h.store, id, { type: "READY", status: "TRUE", reason: "READY", message: "" });
    };
    const io = captureIo();
    expect(await createWaitCommand(runtime).run([id], io)).toBe(0);
    expect(io.out()).toContain("READY=UNKNOWN");
  });

  test("--timeout expires: exit 75; --until garbage is a usage error", async () => {
    const h = make();
    const id = await batch(h);
    const io = captureIo();
    expect(await createWaitCommand(runtimeFor(h)).run([id, "--timeout", "2s"], io)).toBe(75);
    expect(io.err()).toContain("timed out after 2s");
    expect(
      await usage(() => createWaitCommand(runtimeFor(h)).run([id, "--until", "DONE"], captureIo())),
    ).toContain("--until");
    expect(
      await usage(() => createWaitCommand(runtimeFor(h)).run([id, "--timeout", "x"], captureIo())),
    ).toContain("--timeout");
  });

  test("an unknown id exits 1 at once", async () => {
    const h = make();
    const io = captureIo();
    expect(await createWaitCommand(runtimeFor(h)).run(["w-none"], io)).toBe(1);
  });
});

describe("--help on every client command", () => {
  test.each([
    ["submit", createSubmitCommand],
    ["session", createSessionCommand],
    ["exec", createExecCommand],
    ["list", createListCommand],
    ["show", createShowCommand],
    ["cancel", createCancelCommand],
    ["wait", createWaitCommand],
    ["profiles", createProfilesCommand],
  ] as const)("%s --help: usage on stdout, exit 0, nothing sent", async (name, factory) => {
    const h = make();
    const runtime = runtimeFor(h);
    const io = captureIo();
    expect(await factory(runtime).run(["--help"], io)).toBe(0);
    expect(io.out()).toContain(`openai4s ${name}`);
    expect(io.out()).toContain("--server");
    expect(runtime.requests).toEqual([]);
  });
});
