import { expect, test } from "bun:test";
import { closest, didYouMean } from "../../src/lib/command/suggest.ts";

const COMMANDS = ["serve", "submit", "session", "exec", "list", "show", "logs", "cancel", "wait"];

test.each([
  ["lsit", "list"],
  ["lits", "list"],
  ["sumbit", "submit"],
  ["submti", "submit"],
  ["cancle", "cancel"],
  ["shwo", "show"],
  ["LIST", "list"],
  ["sessio", "session"],
])("%s → %s", (typed, meant) => {
  expect(closest(typed, COMMANDS)).toBe(meant);
});

test.each(["frobnicate", "x", "deploy", "s"])("%s has no likely meaning", (typed) => {
  expect(closest(typed, COMMANDS)).toBeNull();
});

test("a flag's prefix names it when only one flag begins so", () => {
  expect(closest("--time", ["--time-limit", "--name", "--profile"])).toBe("--time-limit");
  expect(closest("--time-limt", ["--time-limit", "--name"])).toBe("--time-limit");
  expect(closest("--pro", ["--profile", "--progress"])).toBeNull();
});

test("didYouMean words it, or says nothing", () => {
  expect(didYouMean("lsit", COMMANDS)).toBe(' (did you mean "list"?)');
  expect(didYouMean("zzzzzz", COMMANDS)).toBe("");
});
