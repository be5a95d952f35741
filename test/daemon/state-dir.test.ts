import { describe, expect, test } from "bun:test";
import { chmodSync, mkdirSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { prepareStateDir, resolveStateDir } from "../../src/apps/daemon/state-dir.ts";
import { tempDirs } from "../support/temp-dir.ts";

describe("resolveStateDir: --state-dir, $OPENAI4S_STATE_DIR, $XDG_STATE_HOME, ~/.local/state", () => {
  const base = { homeDir: "/home/ada", cwd: () => "/srv/o4s" };
  test.each([
    [
      "the flag wins",
      "rel/dir",
      { OPENAI4S_STATE_DIR: "/e", XDG_STATE_HOME: "/x" },
      "/srv/o4s/rel/dir",
      "flag",
    ],
    [
      "then the variable",
      undefined,
      { OPENAI4S_STATE_DIR: "/e", XDG_STATE_HOME: "/x" },
      "/e",
      "env",
    ],
    ["then XDG_STATE_HOME", undefined, { XDG_STATE_HOME: "/x" }, "/x/openai4s", "xdg"],
    [
      "a relative XDG_STATE_HOME is ignored",
      undefined,
      { XDG_STATE_HOME: "x" },
      "/home/ada/.local/state/openai4s",
      "home",
    ],
    [
      "empty variables count as unset",
      undefined,
      { OPENAI4S_STATE_DIR: "", XDG_STATE_HOME: "" },
      "/home/ada/.local/state/openai4s",
      "home",
    ],
    ["then the home default", undefined, {}, "/home/ada/.local/state/openai4s", "home"],
  ] as const)("%s", (_l, flag, env, path, source) => {
    expect(resolveStateDir({ ...base, flag, env })).toEqual({ path, source });
  });

  test("the working directory is asked only for a relative flag or variable", () => {
    const asked: string[] = [];
    const cwd = () => {
      asked.push("cwd");
      return "/srv/o4s";
    };
    resolveStateDir({ ...base, cwd, flag: "/abs", env: {} });
    resolveStateDir({ ...base, cwd, flag: undefined, env: { OPENAI4S_STATE_DIR: "/e" } });
    resolveStateDir({ ...base, cwd, flag: undefined, env: {} });
    expect(asked).toEqual([]);
    resolveStateDir({ ...base, cwd, flag: undefined, env: { OPENAI4S_STATE_DIR: "e" } });
    expect(asked).toEqual(["cwd"]);
  });
});

describe("prepareStateDir", () => {
  const tmp = tempDirs("o4s-state-", "each");

  test("creates missing parents, the directory 0700", () => {
    const dir = join(tmp(), "a", "b");
    expect(prepareStateDir(dir)).toEqual({ tightenedFrom: null });
    expect(statSync(dir).mode & 0o777).toBe(0o700);
  });

  test("tightens an existing group-readable directory and says so", () => {
    const dir = join(tmp(), "s");
    mkdirSync(dir);
    chmodSync(dir, 0o755);
    expect(prepareStateDir(dir)).toEqual({ tightenedFrom: 0o755 });
    expect(statSync(dir).mode & 0o777).toBe(0o700);
  });

  test("a file in the way is an error", () => {
    const file = join(tmp(), "f");
    writeFileSync(file, "");
    expect(() => prepareStateDir(file)).toThrow();
  });
});
