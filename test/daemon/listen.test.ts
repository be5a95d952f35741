import { describe, expect, test } from "bun:test";
import { isLoopback, parseListenAddress } from "../../src/apps/daemon/listen.ts";

describe("--listen addresses", () => {
  test.each([
    ["unix:/run/o.sock", { kind: "unix", path: "/run/o.sock" }],
    ["unix:rel.sock", { kind: "unix", path: "/cwd/rel.sock" }],
    ["127.0.0.1:8080", { kind: "tcp", host: "127.0.0.1", port: 8080 }],
    ["localhost:1", { kind: "tcp", host: "localhost", port: 1 }],
    ["[::1]:65535", { kind: "tcp", host: "::1", port: 65535 }],
    ["0.0.0.0:80", { kind: "tcp", host: "0.0.0.0", port: 80 }],
  ])("%s", (raw, address) => {
    expect(parseListenAddress(raw, "/cwd")).toEqual({ kind: "Ok", address } as never);
  });

  test.each(["unix:", "8080", "host:", "host:0", "host:70000", "[nope]:80", "::1:80", "a b:80"])(
    "%s is refused",
    (raw) => {
      expect(parseListenAddress(raw, "/cwd").kind).toBe("Invalid");
    },
  );

  test.each([
    ["127.0.0.1", true],
    ["127.9.9.9", true],
    ["::1", true],
    ["localhost", true],
    ["0.0.0.0", false],
    ["::", false],
    ["10.0.0.5", false],
    ["example.org", false],
    ["localhost.example.org", false],
  ])("loopback(%s) = %p", (host, expected) => {
    expect(isLoopback(host)).toBe(expected);
  });
});
