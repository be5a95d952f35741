/**
 * What a launch line binds is a fixed set the daemon chose, whatever the job's argv says.
 * The failure guarded: the daemon bound the directory of argv[0] as it resolved it on the
 * host, so `x/../../../proc/uptime` (with `x` a symlink the job planted) bound the host's
 * /proc, and `.../etc/passwd` the host's whole /etc.
 */
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import {
  bubblewrapArgv,
  unbindableReason,
  type WrapConfig,
} from "../../src/adapters/isolation-bwrap/bubblewrap.ts";

const CONFIG: WrapConfig = {
  bwrap: "/usr/bin/bwrap",
  maskedRoots: ["/var/lib/openai4s", "/srv/spool"],
  readOnlyExtra: ["/opt/openai4s/bin"],
  runAs: { uid: 65534, gid: 65534, label: "nobody" },
};
const WORKSPACE = "/srv/spool/workloads/w1/workspace";
const CREDENTIALS = "/srv/spool/workloads/w1/allocations/a1/credentials";
const PATHS = { writable: [WORKSPACE], readOnly: [CREDENTIALS] };
const ENV = { vars: { PATH: "/usr/bin:/bin" } };

const BIND_FLAGS = new Set(["--bind", "--ro-bind", "--bind-try", "--ro-bind-try", "--dev-bind"]);

/** The flags before bwrap's `--` (the job's own argv follows it). */
function mountFlags(argv0: string): readonly string[] {
  const argv = bubblewrapArgv(CONFIG, [argv0, "arg"], PATHS, ENV);
  return argv.slice(1, argv.indexOf("--"));
}

function bindSources(flags: readonly string[]): string[] {
  const sources: string[] = [];
  flags.forEach((flag, i) => {
    const source = flags[i + 1];
    if (BIND_FLAGS.has(flag) && source !== undefined) sources.push(source);
  });
  return sources;
}

/** The documented set: system dirs, /etc entries, /proc/sys, extras, the launch's own. */
function allowedSource(source: string): boolean {
  if (["/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/proc/sys"].includes(source)) {
    return true;
  }
  if (source.startsWith("/etc/") && !source.includes("shadow") && !source.includes("sudoers")) {
    return true;
  }
  return [...CONFIG.readOnlyExtra, WORKSPACE, CREDENTIALS].includes(source);
}

/** argv[0] shaped like the attacks: climbs, symlink-ish names, host paths, unicode, long. */
const hostileArgv0 = fc.oneof(
  fc
    .tuple(
      fc.boolean(),
      fc.array(
        fc.constantFrom(
          "..",
          ".",
          "x",
          "d1",
          "proc",
          "uptime",
          "etc",
          "passwd",
          "shadow",
          "sys",
          "dev",
          "root",
          "usr",
          "bin",
          "sh",
          "",
          "ü",
          "\u202e",
          "🦀",
        ),
        { minLength: 1, maxLength: 40 },
      ),
    )
    .map(([absolute, parts]) => `${absolute ? "/" : ""}${parts.join("/")}`),
  fc
    .tuple(fc.integer({ min: 1, max: 30 }), fc.constantFrom("proc/uptime", "etc/passwd", "sys"))
    .map(([n, tail]) => `x/${"../".repeat(n)}${tail}`),
  fc.constantFrom("/proc/uptime", "/etc/passwd", "/sys/kernel", "/dev/null", "/", "/root"),
  fc.string({ minLength: 1, maxLength: 300, unit: "binary" }),
  fc.string({ minLength: 4000, maxLength: 9000 }),
);

describe("a launch line's binds", () => {
  test("are the same, documented set whatever argv[0] is", () => {
    const baseline = mountFlags("true");
    for (const source of bindSources(baseline)) {
      expect({ source, allowed: allowedSource(source) }).toEqual({ source, allowed: true });
    }
    fc.assert(
      fc.property(
        hostileArgv0.filter((s) => s !== "" && !s.includes("\0")),
        (argv0) => {
          expect(mountFlags(argv0)).toEqual(baseline);
        },
      ),
      { numRuns: 400 },
    );
  });

  test("the issue's reproductions bind nothing of the host's /proc, /sys, /dev or /etc", () => {
    for (const argv0 of [
      "x/../../../proc/uptime",
      `x/${"../".repeat(20)}proc/uptime`,
      `x/${"../".repeat(20)}etc/passwd`,
      "/etc/passwd",
      "/proc/self/cwd/../etc/shadow",
    ]) {
      const sources = bindSources(mountFlags(argv0));
      for (const root of ["/proc", "/sys", "/dev", "/etc"]) expect(sources).not.toContain(root);
      expect(sources.filter((s) => !allowedSource(s))).toEqual([]);
    }
  });

  test("the program runs relative to the workspace, not the daemon's cwd", () => {
    const flags = mountFlags("./run.sh");
    expect(flags.slice(flags.indexOf("--chdir"), flags.indexOf("--chdir") + 2)).toEqual([
      "--chdir",
      WORKSPACE,
    ]);
  });

  test("each allocation has its own world-writable /dev/shm and /tmp", () => {
    const text = mountFlags("true").join(" ");
    expect(text).toContain("--dev /dev --perms 1777 --tmpfs /dev/shm");
    expect(text).toContain("--perms 1777 --tmpfs /tmp");
  });

  test("nested /etc entries get 0755 parents, not bwrap's 0700", () => {
    const text = mountFlags("true").join(" ");
    for (const parent of ["/etc/ssl", "/etc/default"]) {
      expect(text).toContain(`--perms 0755 --dir ${parent} `);
    }
    // The parent is made before its first entry is bound, or bwrap has made it 0700 already.
    expect(text.indexOf("--dir /etc/ssl ")).toBeLessThan(text.indexOf("/etc/ssl/certs"));
  });

  test("a daemon-chosen path under the host's /proc, /sys, /dev or /etc is refused", () => {
    for (const dir of ["/proc", "/proc/1/root", "/sys/fs", "/dev", "/etc", "/etc/ssl", "/"]) {
      expect(unbindableReason(dir)).not.toBeNull();
      expect(() =>
        bubblewrapArgv({ ...CONFIG, readOnlyExtra: [dir] }, ["true"], PATHS, ENV),
      ).toThrow("refusing to bind");
    }
    for (const dir of ["relative/dir", "/srv/../etc", "/srv/./x", "/srv/x/"]) {
      expect(unbindableReason(dir)).not.toBeNull();
    }
    expect(() =>
      bubblewrapArgv(CONFIG, ["true"], { writable: ["/proc/1/cwd"], readOnly: [] }, ENV),
    ).toThrow("refusing to bind");
    expect(unbindableReason("/procfs/x")).toBeNull();
    expect(unbindableReason("/etcetera")).toBeNull();
  });
});
