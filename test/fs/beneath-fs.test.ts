import { describe, expect, test } from "bun:test";
import {
  chmodSync,
  closeSync,
  constants,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  renameSync,
  statSync,
  symlinkSync,
  writeFileSync,
  writeSync,
} from "node:fs";
import { join } from "node:path";
import {
  BeneathError,
  chmodDirBeneath,
  chownDirBeneath,
  makeDirBeneath,
  makeDirsBeneath,
  openFileBeneath,
} from "../../src/lib/beneath-fs.ts";
import { tempDirs } from "../support/temp-dir.ts";

const newDir = tempDirs("o4s-beneath-", "each");
const isRoot = process.getuid?.() === 0;

/** A root (the spool) and, beside it, a directory a hostile link points into. */
function rootAndOutside(): { readonly root: string; readonly outside: string } {
  const base = newDir();
  const root = join(base, "spool");
  const outside = join(base, "outside");
  mkdirSync(root, { mode: 0o711 });
  mkdirSync(outside, { mode: 0o755 });
  return { root, outside };
}

function mode(path: string): number {
  return lstatSync(path).mode & 0o7777;
}

describe("makeDirBeneath", () => {
  test("makes every missing directory below the root with the mode asked", () => {
    const { root } = rootAndOutside();
    const target = join(root, "workloads", "w1", "workspace");
    makeDirBeneath(root, target, { mode: 0o700 });
    expect(statSync(target).isDirectory()).toBe(true);
    expect(mode(join(root, "workloads")) & 0o077).toBe(0);
    // Again: an existing path is fine (re-executable preparers).
    makeDirBeneath(root, target, { mode: 0o700 });
  });

  test("a link in the middle of the path is refused and nothing is made where it points", () => {
    const { root, outside } = rootAndOutside();
    symlinkSync(outside, join(root, "workloads"));
    expect(() =>
      makeDirBeneath(root, join(root, "workloads", "w1", "workspace"), { mode: 0o700 }),
    ).toThrow(BeneathError);
    expect(readdirSync(outside)).toEqual([]);
  });

  test("a link as the last component is refused and its target keeps its mode", () => {
    const { root, outside } = rootAndOutside();
    mkdirSync(join(root, "workloads"));
    symlinkSync(outside, join(root, "workloads", "w1"));
    expect(() =>
      makeDirBeneath(root, join(root, "workloads", "w1"), { mode: 0o700, exactMode: true }),
    ).toThrow(BeneathError);
    expect(mode(outside)).toBe(0o755);
  });

  test("a dangling link is not created through", () => {
    const { root, outside } = rootAndOutside();
    symlinkSync(join(outside, "made-by-daemon"), join(root, "workloads"));
    expect(() => makeDirBeneath(root, join(root, "workloads", "w1"), { mode: 0o700 })).toThrow(
      BeneathError,
    );
    expect(existsSync(join(outside, "made-by-daemon"))).toBe(false);
  });

  test("a root that is itself a link is refused", () => {
    const { root, outside } = rootAndOutside();
    const linkRoot = `${root}-link`;
    symlinkSync(outside, linkRoot);
    expect(() => makeDirBeneath(linkRoot, join(linkRoot, "w1"), { mode: 0o700 })).toThrow(
      BeneathError,
    );
    expect(readdirSync(outside)).toEqual([]);
  });

  test("exactMode tightens an existing directory, and only with it", () => {
    const { root } = rootAndOutside();
    const target = join(root, "w1");
    mkdirSync(target);
    chmodSync(target, 0o755);
    makeDirBeneath(root, target, { mode: 0o700 });
    expect(mode(target)).toBe(0o755);
    makeDirBeneath(root, target, { mode: 0o700, exactMode: true });
    expect(mode(target)).toBe(0o700);
  });

  test("a path outside the root is a caller's bug", () => {
    const { root, outside } = rootAndOutside();
    expect(() => makeDirBeneath(root, join(outside, "x"), { mode: 0o700 })).toThrow(/not below/);
    expect(() => makeDirBeneath(root, `${root}/../x`, { mode: 0o700 })).toThrow(/not below/);
  });

  test("a parent made earlier and then swapped for a link is refused on the next walk", () => {
    const { root, outside } = rootAndOutside();
    makeDirBeneath(root, join(root, "a", "b"), { mode: 0o700 });
    renameSync(join(root, "a"), join(outside, "a"));
    symlinkSync(join(outside, "a"), join(root, "a"));
    expect(() => makeDirBeneath(root, join(root, "a", "b", "c"), { mode: 0o700 })).toThrow(
      BeneathError,
    );
    expect(existsSync(join(outside, "a", "b", "c"))).toBe(false);
  });
});

describe("makeDirsBeneath", () => {
  test("makes several paths sharing parents, each tightened with exactMode", () => {
    const { root } = rootAndOutside();
    const w = join(root, "workloads", "w1");
    mkdirSync(w, { recursive: true });
    chmodSync(w, 0o755);
    const paths = [w, join(w, "workspace"), join(w, "allocations"), join(w, "allocations", "a1")];
    makeDirsBeneath(root, paths, { mode: 0o700, exactMode: true });
    for (const path of paths) expect(mode(path)).toBe(0o700);
  });

  test("a link under a shared parent is refused; nothing is made where it points", () => {
    const { root, outside } = rootAndOutside();
    const w = join(root, "workloads", "w1");
    mkdirSync(w, { recursive: true });
    symlinkSync(outside, join(w, "allocations"));
    expect(() =>
      makeDirsBeneath(root, [join(w, "workspace"), join(w, "allocations", "a1")], {
        mode: 0o700,
      }),
    ).toThrow(BeneathError);
    expect(readdirSync(outside)).toEqual([]);
  });
});

describe("chmodDirBeneath", () => {
  test("sets the mode of a real directory", () => {
    const { root } = rootAndOutside();
    mkdirSync(join(root, "d"), { mode: 0o700 });
    chmodDirBeneath(root, join(root, "d"), 0o711);
    expect(mode(join(root, "d"))).toBe(0o711);
  });

  test("a link is refused and its target keeps its mode", () => {
    const { root, outside } = rootAndOutside();
    symlinkSync(outside, join(root, "d"));
    expect(() => chmodDirBeneath(root, join(root, "d"), 0o777)).toThrow(BeneathError);
    expect(mode(outside)).toBe(0o755);
  });
});

describe.if(isRoot)("chownDirBeneath (as root)", () => {
  const nobody = { uid: 65534, gid: 65534 };

  test("gives the directory and its regular files, never what a link points at", () => {
    const { root, outside } = rootAndOutside();
    const dir = join(root, "credentials");
    mkdirSync(dir, { mode: 0o700 });
    writeFileSync(join(dir, "rank-0.json"), "{}", { mode: 0o600 });
    const secret = join(outside, "secret");
    writeFileSync(secret, "host secret", { mode: 0o600 });
    symlinkSync(secret, join(dir, "rank-1.json"));
    chownDirBeneath(root, dir, nobody, { regularFiles: true });
    expect(lstatSync(dir).uid).toBe(nobody.uid);
    expect(lstatSync(join(dir, "rank-0.json")).uid).toBe(nobody.uid);
    expect(lstatSync(secret).uid).toBe(0);
    expect(lstatSync(join(dir, "rank-1.json")).uid).toBe(0);
  });

  test("a link in place of the directory is refused and its target keeps its owner", () => {
    const { root, outside } = rootAndOutside();
    symlinkSync(outside, join(root, "workspace"));
    expect(() => chownDirBeneath(root, join(root, "workspace"), nobody)).toThrow(BeneathError);
    expect(lstatSync(outside).uid).toBe(0);
  });
});

describe("openFileBeneath", () => {
  const flags = constants.O_WRONLY | constants.O_CREAT | constants.O_APPEND;

  test("creates and opens a file below the root", () => {
    const { root } = rootAndOutside();
    mkdirSync(join(root, "alloc"));
    const fd = openFileBeneath(root, join(root, "alloc", "stdout.log"), flags, 0o600);
    writeSync(fd, "hi");
    closeSync(fd);
    expect(mode(join(root, "alloc", "stdout.log")) & 0o077).toBe(0);
  });

  test("a link as the file, or on its way, is refused and nothing is written outside", () => {
    const { root, outside } = rootAndOutside();
    mkdirSync(join(root, "alloc"));
    symlinkSync(join(outside, "x.log"), join(root, "alloc", "stdout.log"));
    expect(() => openFileBeneath(root, join(root, "alloc", "stdout.log"), flags, 0o600)).toThrow(
      BeneathError,
    );
    symlinkSync(outside, join(root, "alloc2"));
    expect(() => openFileBeneath(root, join(root, "alloc2", "stdout.log"), flags, 0o600)).toThrow(
      BeneathError,
    );
    expect(readdirSync(outside)).toEqual([]);
  });
});
