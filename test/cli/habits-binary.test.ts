/**
 * A Slurm user's habits, through the BUILT binary against a running daemon (issue 35):
 * client options before the command, "did you mean" for a mistyped command or flag, a
 * missing token that names `--token-file` and `OPENAI4S_TOKEN`, time limits in the
 * scheduler's own forms, and `wait` exiting as `sbatch --wait` does (the job's own code, and
 * documented codes for cancelled, timed out and its own --timeout).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type Daemon, ensureBuilt, freePort, ms, startDaemon } from "../support/binary-daemon.ts";
import { eventually } from "../support/eventually.ts";

const TIMEOUT_MS = 60_000;
let daemon: Daemon;
let server: string;
let adminTokenFile: string;

beforeAll(async () => {
  ensureBuilt();
  const port = await freePort();
  server = `http://127.0.0.1:${port}`;
  daemon = await startDaemon({ gateway: false, args: ["--listen", `127.0.0.1:${port}`] });
  adminTokenFile = join(daemon.dir, "admin.token");
  writeFileSync(adminTokenFile, readFileSync(join(daemon.stateDir, "admin-token")), {
    mode: 0o600,
  });
}, TIMEOUT_MS);

afterAll(async () => {
  await daemon?.stop();
});

describe("options and mistakes", () => {
  test("client options before the command reach it: --server URL --token-file F profiles", async () => {
    const r = await daemon.cli("--server", server, "--token-file", adminTokenFile, "profiles");
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("default");
  });

  test("a mistyped command or flag gets one line with the likely one", async () => {
    const command = await daemon.cli("profils");
    expect({ code: command.code, err: command.stderr.split("\n")[0] }).toEqual({
      code: 2,
      err: 'openai4s: unknown command "profils" (did you mean "profiles"?)',
    });
    const flag = await daemon.cli("submit", "--time-limt", "5", "--", "true");
    expect(flag.code).toBe(2);
    expect(flag.stderr).toContain('unknown option "--time-limt" (did you mean "--time-limit"?)');
  });

  test("over TCP without a token, the error names --token-file and OPENAI4S_TOKEN", async () => {
    const r = await daemon.cli("--server", server, "profiles");
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain("--token-file");
    expect(r.stderr).toContain("OPENAI4S_TOKEN");
  });
});

describe("time limits in the scheduler's forms", () => {
  // Each form's seconds, read back as the running job's deadline minus its start.
  const FORMS: readonly (readonly [string, number])[] = [
    ["90", 90 * 60], // MM: minutes, as sbatch --time reads a bare number
    ["45:30", 45 * 60 + 30], // MM:SS
    ["2:03:04", 2 * 3600 + 3 * 60 + 4], // HH:MM:SS
    ["1-02", 86400 + 2 * 3600], // D-HH
    ["1-02:03", 86400 + 2 * 3600 + 3 * 60], // D-HH:MM
    ["1-02:03:04", 86400 + 2 * 3600 + 3 * 60 + 4], // D-HH:MM:SS
    ["1h30m", 5400], // today's units still work
  ];

  test(
    "each form is the job's time limit",
    async () => {
      const submitted = await Promise.all(
        FORMS.map(([form]) =>
          daemon.cli("submit", "--name", "tl", "--time-limit", form, "--", "sleep", "60"),
        ),
      );
      expect(submitted.map((r) => r.stderr)).toEqual(FORMS.map(() => ""));
      const ids = submitted.map((r) => r.stdout.trim());
      const limitOf = async (id: string, form: string) => {
        const w = await daemon.show(id);
        const deadline = (w as unknown as { deadline: string | null }).deadline;
        const start = w.allocations[0]?.startedAt ?? null;
        if (deadline === null || start === null) throw new Error(`${id} has not started`);
        return [form, Math.round((ms(deadline) - ms(start)) / 1000)] as const;
      };
      const limits = await eventually(
        () => Promise.all(ids.map((id, i) => limitOf(id, FORMS[i]?.[0] ?? ""))),
        { timeoutMs: 30_000, intervalMs: 100 },
      );
      for (const id of ids) await daemon.cli("cancel", id);
      expect(limits).toEqual(FORMS.map(([form, seconds]) => [form, seconds]));
    },
    TIMEOUT_MS,
  );
});

describe("wait exits as sbatch --wait does", () => {
  async function submitThenWait(submit: string[], wait: string[] = []) {
    const s = await daemon.cli("submit", "--name", "w", ...submit);
    expect(s.code).toBe(0);
    const id = s.stdout.trim();
    return { id, wait: daemon.cli("wait", id, ...wait) };
  }

  test(
    "the job's own exit code; 143 cancelled; 124 out of its time limit; 75 for --timeout",
    async () => {
      const own = await submitThenWait(["--", "sh", "-c", "exit 7"]);
      const limit = await submitThenWait(["--time-limit", "0:01", "--", "sleep", "60"]);
      const gaveUp = await submitThenWait(["--", "sleep", "60"], ["--timeout", "1"]);
      const cancelled = await submitThenWait(["--", "sleep", "60"]);
      await daemon.cli("cancel", cancelled.id);
      const codes = {
        own: (await own.wait).code,
        limit: (await limit.wait).code,
        gaveUp: (await gaveUp.wait).code,
        cancelled: (await cancelled.wait).code,
      };
      await daemon.cli("cancel", gaveUp.id);
      expect(codes).toEqual({ own: 7, limit: 124, gaveUp: 75, cancelled: 143 });
    },
    TIMEOUT_MS,
  );
});
