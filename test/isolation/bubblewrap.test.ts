import { describe, expect, test } from "bun:test";
import {
  chmodSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import {
  bubblewrapArgv,
  createBubblewrapSandbox,
  resolveBwrap,
} from "../../src/adapters/isolation-bwrap/bubblewrap.ts";
import { manualClock } from "../../src/lib/clock.ts";
import { silentLog } from "../../src/lib/log.ts";
import { TEST_RUN_AS } from "../support/run-as.ts";
import { tempDirs } from "../support/temp-dir.ts";

const JOB_ENV = { vars: { PATH: "/usr/bin:/bin" } };

const REAL_BWRAP = resolveBwrap(undefined);
const tempDir = tempDirs("o4s-iso-", "each");

/** A stand-in for bwrap: a shell script with the given body, made executable. */
function fakeBwrap(body: string): string {
  const path = join(tempDir(), "bwrap");
  writeFileSync(path, `#!/bin/sh\n${body}\n`);
  chmodSync(path, 0o755);
  return path;
}

/** A bwrap that forwards to the real one minus the given flags (and their arguments). */
function bwrapWithout(flags: Readonly<Record<string, number>>): string {
  const cases = Object.entries(flags)
    .map(([flag, n]) => `    ${flag}) skip=${n}; continue ;;`)
    .join("\n");
  return fakeBwrap(`skip=0
for a; do
  shift
  if [ "$skip" -gt 0 ]; then skip=$((skip - 1)); continue; fi
  case "$a" in
${cases}
  esac
  set -- "$@" "$a"
done
exec ${REAL_BWRAP} "$@"`);
}

describe("bubblewrap sandbox verification", () => {
  test("is Verified on this machine with the real bwrap", async () => {
    expect(REAL_BWRAP).not.toBeNull();
    const sandbox = createBubblewrapSandbox({
      runAs: TEST_RUN_AS,
      log: silentLog,
      tmpRoot: tempDir(),
    });
    const verdict = await sandbox.verify();
    expect(verdict).toEqual({ kind: "Verified", mechanism: expect.stringContaining("bubblewrap") });
  });

  test("is Unverified when bwrap is missing", async () => {
    const sandbox = createBubblewrapSandbox({
      runAs: TEST_RUN_AS,
      log: silentLog,
      bwrapPath: join(tempDir(), "no-such-bwrap"),
    });
    const verdict = await sandbox.verify();
    expect(verdict.kind).toBe("Unverified");
    if (verdict.kind === "Unverified") expect(verdict.message).toContain("not found");
  });

  test("is Unverified with a fake bwrap that runs the command without isolating it", async () => {
    const bwrapPath = fakeBwrap(
      'while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do shift; done\nshift\nexec "$@"',
    );
    const tmpRoot = tempDir();
    const sandbox = createBubblewrapSandbox({
      runAs: TEST_RUN_AS,
      log: silentLog,
      bwrapPath,
      tmpRoot,
    });
    const verdict = await sandbox.verify();
    expect(verdict.kind).toBe("Unverified");
    if (verdict.kind !== "Unverified") return;
    // The privilege drop alone keeps the probe out of the 0700 probe root; the missing
    // namespaces still show.
    expect(verdict.message).toContain("sibling process was visible");
    expect(verdict.message).toContain("/etc/shadow existed for the probe");
    // The probe cleaned up after itself.
    expect(readdirSync(tmpRoot)).toEqual([]);
  });

  test("each isolation property is checked on its own", async () => {
    const withoutPid = await createBubblewrapSandbox({
      runAs: TEST_RUN_AS,
      log: silentLog,
      bwrapPath: bwrapWithout({ "--unshare-pid": 0 }),
      tmpRoot: tempDir(),
    }).verify();
    expect(withoutPid).toEqual({
      kind: "Unverified",
      message: "isolation probe: a sibling process was visible",
    });

    // Root drops with setpriv inside; otherwise bwrap drops every capability itself.
    const capDrop = TEST_RUN_AS === null ? { "--cap-drop": 1 } : { "--bounding-set=-all": 0 };
    const keepingCaps = await createBubblewrapSandbox({
      runAs: TEST_RUN_AS,
      log: silentLog,
      bwrapPath: bwrapWithout(capDrop),
      tmpRoot: tempDir(),
    }).verify();
    expect(keepingCaps.kind).toBe("Unverified");
    if (keepingCaps.kind === "Unverified") {
      expect(keepingCaps.message).toContain("the probe kept capabilities (CapBnd");
    }

    const failing = await createBubblewrapSandbox({
      runAs: TEST_RUN_AS,
      log: silentLog,
      bwrapPath: fakeBwrap("echo broken >&2; exit 1"),
      tmpRoot: tempDir(),
    }).verify();
    expect(failing).toEqual({
      kind: "Unverified",
      message: "isolation probe: probe sandbox exited 1: broken",
    });
  });

  test("a probe that hangs is Unverified after the deadline", async () => {
    const sandbox = createBubblewrapSandbox({
      runAs: TEST_RUN_AS,
      log: silentLog,
      bwrapPath: fakeBwrap("exec sleep 30"),
      tmpRoot: tempDir(),
      probeTimeoutMs: 200,
    });
    const verdict = await sandbox.verify();
    expect(verdict.kind).toBe("Unverified");
  });

  test("the verdict is cached for the TTL, shared by concurrent callers, then re-probed", async () => {
    const counter = join(tempDir(), "count");
    const bwrapPath = fakeBwrap(`echo x >> ${counter}\nexec ${REAL_BWRAP} "$@"`);
    const clock = manualClock();
    const sandbox = createBubblewrapSandbox({
      runAs: TEST_RUN_AS,
      log: silentLog,
      bwrapPath,
      tmpRoot: tempDir(),
      clock,
      cacheTtlMs: 1000,
    });
    const probes = () => readFileSync(counter, "utf8").split("\n").filter(Boolean).length;
    const [first, second] = await Promise.all([sandbox.verify(), sandbox.verify()]);
    expect(first.kind).toBe("Verified");
    expect(second).toBe(first);
    expect(probes()).toBe(1);
    clock.advance(999);
    await sandbox.verify();
    expect(probes()).toBe(1);
    clock.advance(1);
    await sandbox.verify();
    expect(probes()).toBe(2);
    await sandbox.refresh();
    expect(probes()).toBe(3);
  });
});

describe("bubblewrap wrap() as a real allocation uses it", () => {
  function layout() {
    const state = tempDir();
    const mine = join(state, "workloads", "w1");
    const other = join(state, "workloads", "w2");
    const paths = {
      workspace: join(mine, "workspace"),
      alloc: join(mine, "allocations", "a1"),
      credentials: join(mine, "allocations", "a1", "credentials"),
      otherWorkspace: join(other, "workspace"),
    };
    for (const d of [paths.workspace, paths.credentials, paths.otherWorkspace]) {
      mkdirSync(d, { recursive: true });
    }
    writeFileSync(join(paths.credentials, "rank-0"), "secret", { mode: 0o600 });
    writeFileSync(join(paths.otherWorkspace, "data"), "theirs", { mode: 0o600 });
    writeFileSync(join(state, "signing-key"), "key", { mode: 0o600 });
    return { state, ...paths };
  }

  function runIn(argv: readonly string[]): { code: number; out: string } {
    const result = Bun.spawnSync([...argv], { stdout: "pipe", stderr: "pipe" });
    return { code: result.exitCode, out: result.stdout.toString() + result.stderr.toString() };
  }

  test("sees its own workspace and credential (read-only), not siblings or the state dir", () => {
    const l = layout();
    const sandbox = createBubblewrapSandbox({
      runAs: TEST_RUN_AS,
      log: silentLog,
      maskedRoots: [l.state],
    });
    const script = [
      `cat ${l.credentials}/rank-0 && echo`,
      `echo hello > ${l.workspace}/out && echo wrote-workspace`,
      `(echo x > ${l.credentials}/forged) 2>/dev/null || echo credentials-read-only`,
      `test -e ${l.otherWorkspace}/data || echo sibling-absent`,
      `test -e ${l.state}/signing-key || echo key-absent`,
    ].join("; ");
    const runAs = sandbox.prepare({
      spoolDir: l.state,
      workspaceDir: l.workspace,
      credentialDir: l.credentials,
    });
    const argv = sandbox.wrap(
      ["/bin/sh", "-c", script],
      { writable: [l.workspace, l.alloc], readOnly: [l.credentials] },
      JOB_ENV,
      runAs,
    );
    const { code, out } = runIn(argv);
    expect(code).toBe(0);
    expect(out.split("\n").filter(Boolean)).toEqual([
      "secret",
      "wrote-workspace",
      "credentials-read-only",
      "sibling-absent",
      "key-absent",
    ]);
    expect(readFileSync(join(l.workspace, "out"), "utf8")).toBe("hello\n");
    expect(existsSync(join(l.credentials, "forged"))).toBe(false);
  });

  test("a read-only extra installed above the workloads does not re-expose them", () => {
    const l = layout();
    // The "binary" lives in the parent of every workload, so binding its directory (as the
    // daemon does for its own binary's) would show every sibling read-only...
    const tool = join(l.state, "workloads", "tool.sh");
    writeFileSync(tool, `#!/bin/sh\ntest -e ${l.otherWorkspace}/data && echo LEAK || echo ok\n`);
    chmodSync(tool, 0o755);
    const paths = { writable: [l.workspace, l.alloc], readOnly: [l.credentials] };
    const bwrap = REAL_BWRAP ?? "bwrap";
    const readOnlyExtra = [join(l.state, "workloads")];
    const unmasked = bubblewrapArgv(
      { bwrap, maskedRoots: [], readOnlyExtra, runAs: TEST_RUN_AS },
      [tool],
      paths,
      JOB_ENV,
    );
    expect(runIn(unmasked).out.trim()).toBe("LEAK");
    // ...unless the state dir is masked after it: then the tool is not even there, and the
    // launch fails visibly instead of leaking.
    const masked = bubblewrapArgv(
      { bwrap, maskedRoots: [l.state], readOnlyExtra, runAs: TEST_RUN_AS },
      [tool],
      paths,
      JOB_ENV,
    );
    const result = runIn(masked);
    expect(result.out).not.toContain("LEAK");
    expect(result.code).not.toBe(0);
  });

  test("the command follows `--`, after every mount and the namespace flags", () => {
    const runAs = { uid: 65534, gid: 65534, label: "nobody" };
    const argv = bubblewrapArgv(
      { bwrap: "/usr/bin/bwrap", maskedRoots: [], readOnlyExtra: [], runAs },
      ["/bin/true", "--bind", "/", "/"],
      { writable: ["/w"], readOnly: ["/r"] },
      { vars: { LD_PRELOAD: "/w/evil.so", A: "1" } },
    );
    const dash = argv.indexOf("--");
    const flags = argv.slice(0, dash);
    // The job's environment is applied after the privilege drop, by env -i; bwrap itself
    // (a host-side process) starts from a cleared environment and never sees it.
    expect(argv.slice(dash + 1)).toEqual([
      "/usr/bin/setpriv",
      "--reuid=65534",
      "--regid=65534",
      "--clear-groups",
      "--no-new-privs",
      "--inh-caps=-all",
      "--bounding-set=-all",
      "--",
      "/usr/bin/env",
      "-i",
      "--",
      "LD_PRELOAD=/w/evil.so",
      "A=1",
      "/bin/true",
      "--bind",
      "/",
      "/",
    ]);
    expect(flags).toContain("--clearenv");
    expect(flags).not.toContain("--setenv");
    for (const f of ["--unshare-pid", "--unshare-ipc", "--die-with-parent", "--new-session"]) {
      expect(flags).toContain(f);
    }
    expect(flags).not.toContain("--unshare-net");
    expect(flags.join(" ")).toContain("--ro-bind /proc/sys /proc/sys");
    expect(flags.join(" ")).not.toContain("--ro-bind-try /etc /etc");
    expect(flags.join(" ")).not.toContain("shadow");
    // Read-only binds come last, so a credential dir inside a writable dir stays read-only.
    expect(flags.lastIndexOf("--ro-bind")).toBeGreaterThan(flags.lastIndexOf("--bind"));
    // Not root: a user namespace and no capabilities instead of the drop.
    const unprivileged = bubblewrapArgv(
      { bwrap: "/usr/bin/bwrap", maskedRoots: [], readOnlyExtra: [], runAs: null },
      ["/bin/true"],
      { writable: [], readOnly: [] },
      { vars: {} },
    );
    expect(unprivileged).toContain("--unshare-user");
    expect(unprivileged.join(" ")).toContain("--cap-drop ALL --clearenv -- /usr/bin/env");
    expect(unprivileged).not.toContain("/usr/bin/setpriv");
  });
});

describe.if(TEST_RUN_AS !== null)("bubblewrap as root: the probe checks the privilege drop", () => {
  test("a sandbox that keeps uid 0 is Unverified", async () => {
    const verdict = await createBubblewrapSandbox({
      runAs: TEST_RUN_AS,
      log: silentLog,
      bwrapPath: bwrapWithout({ "--reuid=65534": 0 }),
      tmpRoot: tempDir(),
    }).verify();
    expect(verdict.kind).toBe("Unverified");
    if (verdict.kind === "Unverified") {
      // Root with an empty bounding set execs with no capability, so it cannot even read
      // its own marker (the job's identity owns it); still uid 0, still refused.
      expect(verdict.message).toContain("the probe ran as uid 0");
    }
  });

  test("a launch without no_new_privs is Unverified", async () => {
    // bwrap itself sets no_new_privs; a stand-in that skips bwrap and the drop's flag shows
    // that the probe reads it.
    const bwrapPath = fakeBwrap(
      'while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do shift; done\nshift\n' +
        'for a; do shift; [ "$a" = --no-new-privs ] || set -- "$@" "$a"; done\nexec "$@"',
    );
    const verdict = await createBubblewrapSandbox({
      runAs: TEST_RUN_AS,
      log: silentLog,
      bwrapPath,
      tmpRoot: tempDir(),
    }).verify();
    expect(verdict.kind).toBe("Unverified");
    if (verdict.kind === "Unverified") {
      expect(verdict.message).toContain("the probe could gain privileges (NoNewPrivs 0)");
    }
  });

  test("a sandbox running as root with /proc/sys writable and all of /etc is Unverified", async () => {
    // The command line this project shipped before: no drop, /etc whole, /proc/sys as bwrap
    // leaves it. The probe must name each way out.
    const bwrapPath = fakeBwrap(`skip=0
for a; do
  shift
  if [ "$skip" -gt 0 ]; then skip=$((skip - 1)); continue; fi
  case "$a" in
    --reuid=*|--bounding-set=*) continue ;;
    --ro-bind) if [ "$1" = /proc/sys ]; then skip=2; continue; fi ;;
    --ro-bind-try) case "$1" in /etc/*) skip=2; continue ;; esac ;;
    --perms) case "$3" in
      /etc) skip=3; set -- "$@" --ro-bind /etc /etc; continue ;;
      /etc/*) skip=3; continue ;;
    esac ;;
  esac
  set -- "$@" "$a"
done
exec ${REAL_BWRAP} "$@"`);
    const verdict = await createBubblewrapSandbox({
      runAs: TEST_RUN_AS,
      log: silentLog,
      bwrapPath,
      tmpRoot: tempDir(),
    }).verify();
    expect(verdict.kind).toBe("Unverified");
    if (verdict.kind !== "Unverified") return;
    expect(verdict.message).toContain("the probe ran as uid 0");
    expect(verdict.message).toContain("could write /proc/sys/kernel/core_pattern");
    expect(verdict.message).toContain("/etc/shadow existed for the probe");
  });
});
