/**
 * Admin-declared mounts (issue 22): the declaration's shape (absolute, normalized, no
 * reserved target, `{user}` only in a source and only on an owner profile), the sources'
 * checks on the host (exist, a directory, never resolving into the daemon's trees or the
 * host's /proc, /sys, /dev, /etc; no link below `{user}`), both configuration forms, the
 * sandbox's binds, and the API showing targets and modes only.
 */
import { describe, expect, test } from "bun:test";
import { mkdirSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { parseClusterConfig } from "../../src/adapters/backend-slurm/profiles.ts";
import { bubblewrapArgv } from "../../src/adapters/isolation-bwrap/bubblewrap.ts";
import { mountProblem, parseMountList, sourceFor } from "../../src/core/mounts.ts";
import { boundMount, forbiddenRoots, startupSourceProblem } from "../../src/lib/mount-sources.ts";
import { profileView } from "../../src/servers/http/profiles/profile-view.ts";
import { localProfilesFromEnv } from "../support/local-profiles.ts";
import { tempDirs } from "../support/temp-dir.ts";

const tmp = tempDirs("o4s-mounts-", "each");
const W = "[m]";

describe("the declaration", () => {
  test.each([
    [{ source: "data", target: "/data", mode: "ro" }, /source must be an absolute path/],
    [{ source: "/srv/../etc", target: "/data", mode: "ro" }, /source must be a normalized/],
    [{ source: "/srv/data/", target: "/data", mode: "ro" }, /source must be a normalized/],
    [{ source: "/srv/data", target: "/", mode: "ro" }, /target must not be the root/],
    [{ source: "/srv/data", target: "/usr/data", mode: "ro" }, /cover the sandbox's \/usr/],
    [{ source: "/srv/data", target: "/etc", mode: "ro" }, /cover the sandbox's \/etc/],
    [{ source: "/srv/data", target: "/tmp", mode: "rw" }, /cover the sandbox's \/tmp/],
    [{ source: "/srv/data", target: "/data/{user}", mode: "ro" }, /target must not use \{user\}/],
    [{ source: "/srv/a b", target: "/data", mode: "ro" }, /printable ASCII/],
    [{ source: "/srv/x{user}", target: "/data", mode: "ro" }, /whole path component/],
  ] as const)("%j is refused", (mount, why) => {
    expect(mountProblem(mount, true, W)).toMatch(why);
  });

  test("{user} needs an owner profile; then it is the owner's name", () => {
    const mount = { source: "/srv/data/{user}", target: "/data", mode: "rw" } as const;
    expect(mountProblem(mount, false, W)).toMatch(/needs run_as = "owner"/);
    expect(mountProblem(mount, true, W)).toBeNull();
    expect(sourceFor(mount, "alice")).toBe("/srv/data/alice");
    expect(sourceFor(mount, null)).toBeNull();
  });

  test("OPENAI4S_LOCAL_MOUNTS: SOURCE:TARGET:MODE,...", () => {
    expect(parseMountList("/srv/a:/a:ro,/srv/b:/b:rw")).toEqual([
      { source: "/srv/a", target: "/a", mode: "ro" },
      { source: "/srv/b", target: "/b", mode: "rw" },
    ]);
    expect(parseMountList("/srv/a:/a")).toHaveProperty("error");
    expect(parseMountList("/srv/a:/a:rx")).toHaveProperty("error");
    const local = localProfilesFromEnv({ OPENAI4S_LOCAL_MOUNTS: "/srv/a:/a:ro,/srv/b:/a/b:rw" });
    expect(local).toMatchObject({ kind: "ConfigError", message: expect.stringMatching(/overlap/) });
    const user = localProfilesFromEnv({ OPENAI4S_LOCAL_MOUNTS: "/srv/{user}:/a:ro" });
    expect(user).toMatchObject({ kind: "ConfigError", message: expect.stringMatching(/owner/) });
  });

  test("cluster.toml: [profiles.NAME.mounts.LABEL], each key required and checked", () => {
    const head = '[profiles.p]\ndescription = "d"\nallow_batch = true\nrun_as = "owner"\n';
    const ok = parseClusterConfig(
      `${head}[profiles.p.mounts.data]\nsource = "/srv/{user}"\ntarget = "/data"\nmode = "rw"\n`,
    );
    if (ok.kind !== "Loaded") throw new Error(JSON.stringify(ok));
    const profile = ok.profiles[0]?.public();
    expect(ok.profiles[0]?.describeMapping().slice(2)).toEqual([
      "runs as the owning principal's unix account (submitted with --uid/--gid)",
      "mount /srv/{user} at /data (rw)",
    ]);
    expect(profile?.mounts).toEqual([{ source: "/srv/{user}", target: "/data", mode: "rw" }]);
    // The API: where and how, never from where.
    const view = profileView(profile as never);
    expect(view.mounts).toEqual([{ target: "/data", mode: "rw" }]);
    expect(JSON.stringify(view)).not.toContain("/srv");
    expect(
      parseClusterConfig(`${head}[profiles.p.mounts.data]\nsource = "/srv/x"\ntarget = "/d"\n`),
    ).toMatchObject({ kind: "Refused", message: "[profiles.p.mounts.data] has no mode" });
    expect(
      parseClusterConfig(
        `${head}[profiles.p.mounts.data]\nsource = "/srv/x"\ntarget = "/d"\nmode = "rwx"\n`,
      ),
    ).toMatchObject({ kind: "Refused", line: 8, message: expect.stringMatching(/"ro" or "rw"/) });
    expect(
      parseClusterConfig(
        `${head}[profiles.p.mounts.data]\nsource = "/srv/x"\ntarget = "/proc/x"\nmode = "ro"\n`,
      ),
    ).toMatchObject({ kind: "Refused", message: expect.stringMatching(/\/proc/) });
  });
});

describe("the source on the host", () => {
  test("exists, is a directory, and resolves outside the daemon's and the host's trees", () => {
    const root = tmp();
    const state = join(root, "state");
    const data = join(root, "data");
    mkdirSync(join(state, "spool"), { recursive: true });
    mkdirSync(data);
    symlinkSync(join(state, "spool"), join(root, "sneaky"));
    symlinkSync("/etc", join(root, "etc-link"));
    const forbidden = forbiddenRoots([state]);
    const m = (source: string) => ({ source, target: "/data", mode: "ro" as const });
    expect(startupSourceProblem(m(data), forbidden)).toBeNull();
    expect(startupSourceProblem(m(join(root, "nope")), forbidden)).toMatch(/does not exist/);
    expect(startupSourceProblem(m(join(state, "spool")), forbidden)).toMatch(/overlaps/);
    expect(startupSourceProblem(m(join(root, "sneaky")), forbidden)).toMatch(/overlaps/);
    expect(startupSourceProblem(m(join(root, "etc-link")), forbidden)).toMatch(/overlaps \/etc/);
    expect(startupSourceProblem(m(root), forbidden)).toMatch(/overlaps/);
    expect(startupSourceProblem(m("/proc/self"), forbidden)).toMatch(/overlaps \/proc/);
  });

  test("a {user} source: its fixed part at start, the user's directory at launch, no link below", () => {
    const root = tmp();
    mkdirSync(join(root, "alice"));
    symlinkSync(join(root, "alice"), join(root, "mallory"));
    const forbidden = forbiddenRoots([]);
    const m = { source: join(root, "{user}"), target: "/data", mode: "rw" } as const;
    expect(startupSourceProblem(m, forbidden)).toBeNull();
    expect(boundMount(m, "alice", forbidden)).toEqual({
      source: join(root, "alice"),
      target: "/data",
      mode: "rw",
    });
    expect(boundMount(m, "mallory", forbidden)).toMatchObject({
      error: expect.stringMatching(/symbolic link/),
    });
    expect(boundMount(m, "bob", forbidden)).toMatchObject({
      error: expect.stringMatching(/does not exist/),
    });
    expect(boundMount(m, null, forbidden)).toMatchObject({
      error: expect.stringMatching(/owner's unix user/),
    });
  });
});

test("the sandbox binds each mount at its target, read-only or writable as declared", () => {
  const argv = bubblewrapArgv(
    { bwrap: "/usr/bin/bwrap", maskedRoots: [], readOnlyExtra: [], runAs: null },
    ["true"],
    {
      writable: ["/spool/w/workspace"],
      readOnly: [],
      mounts: [
        { source: "/srv/ref", target: "/ref", mode: "ro" },
        { source: "/srv/scratch/alice", target: "/scratch/mine", mode: "rw" },
      ],
    },
    { vars: {} },
  ).join(" ");
  expect(argv).toContain("--ro-bind /srv/ref /ref");
  expect(argv).toContain("--perms 0755 --dir /scratch --bind /srv/scratch/alice /scratch/mine");
});
