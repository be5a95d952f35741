import { describe, expect, test } from "bun:test";
import { createClient } from "../../src/apps/cli/api-client.ts";
import {
  problemExitCode,
  renderProblem,
  resolveServer,
  resolveToken,
} from "../../src/apps/cli/client.ts";
import { UsageError } from "../../src/lib/command/command.ts";

const runtime = { homeDir: () => "/home/ada", cwd: () => "/srv/o4s" };

describe("--server, $OPENAI4S_SERVER, default socket", () => {
  test.each([
    ["unix:/run/a.sock", {}, { kind: "unix", path: "/run/a.sock" }],
    ["unix:rel.sock", {}, { kind: "unix", path: "/srv/o4s/rel.sock" }],
    ["http://127.0.0.1:8080", {}, { kind: "http", baseUrl: "http://127.0.0.1:8080" }],
    ["http://host:1/ignored/path", {}, { kind: "http", baseUrl: "http://host:1" }],
    [undefined, { OPENAI4S_SERVER: "unix:/e.sock" }, { kind: "unix", path: "/e.sock" }],
    [undefined, { OPENAI4S_STATE_DIR: "/s" }, { kind: "unix", path: "/s/api.sock" }],
    [undefined, { XDG_STATE_HOME: "/x" }, { kind: "unix", path: "/x/openai4s/api.sock" }],
    [undefined, {}, { kind: "unix", path: "/home/ada/.local/state/openai4s/api.sock" }],
  ] as const)("%p with %p", (flag, env, expected) => {
    expect(resolveServer(flag, env, runtime)).toEqual(expected as never);
  });

  test.each(["ftp://x", "localhost:8080x", "unix:", "nonsense"])("%p is a usage error", (flag) => {
    expect(() => resolveServer(flag, {}, runtime)).toThrow(UsageError);
  });

  test("the variable's error names the variable", () => {
    expect(() => resolveServer(undefined, { OPENAI4S_SERVER: "x" }, runtime)).toThrow(
      /\$OPENAI4S_SERVER/,
    );
  });
});

describe("tokens", () => {
  const files = {
    readFile: async (p: string) => (p === "/srv/o4s/t" ? " tok\n" : ""),
    cwd: () => "/srv/o4s",
  };
  test("--token-file is read and trimmed; else $OPENAI4S_TOKEN; else none", async () => {
    expect(await resolveToken("t", { OPENAI4S_TOKEN: "env" }, files)).toBe("tok");
    expect(await resolveToken(undefined, { OPENAI4S_TOKEN: "env" }, files)).toBe("env");
    expect(await resolveToken(undefined, {}, files)).toBeNull();
  });
  test("an unreadable or empty token file is a usage error naming the flag", async () => {
    const failing = {
      readFile: async () => {
        throw new Error("EACCES");
      },
      cwd: () => "/",
    };
    await expect(resolveToken("/x", {}, failing)).rejects.toThrow(/--token-file/);
    await expect(resolveToken("/empty", {}, files)).rejects.toThrow(/empty/);
  });
});

describe("requests", () => {
  test("a bearer token and JSON body are sent; the unix path is the socket", async () => {
    const seen: { url: string; init: RequestInit & { unix?: string } }[] = [];
    const client = createClient({ kind: "unix", path: "/s.sock" }, "tok", {
      fetch: async (url, init) => {
        seen.push({ url, init });
        return Response.json({ ok: true }, { status: 201 });
      },
    });
    const result = await client.request("POST", "/v1/x", { body: { a: 1 } });
    expect(result).toEqual({ kind: "Ok", status: 201, body: { ok: true } });
    expect(seen[0]?.url).toBe("http://localhost/v1/x");
    expect(seen[0]?.init.unix).toBe("/s.sock");
    const headers = seen[0]?.init.headers as Record<string, string>;
    expect(headers["Authorization"]).toBe("Bearer tok");
    expect(seen[0]?.init.body).toBe('{"a":1}');
  });

  test("a refused connection is Unreachable, naming the server", async () => {
    const client = createClient({ kind: "http", baseUrl: "http://127.0.0.1:9" }, null, {
      fetch: async () => {
        throw new Error("Unable to connect");
      },
    });
    const result = await client.request("GET", "/healthz");
    expect(result.kind).toBe("Unreachable");
    expect(result.kind === "Unreachable" && result.message).toContain("http://127.0.0.1:9");
  });

  test("a non-problem error body still becomes a problem", async () => {
    const client = createClient({ kind: "http", baseUrl: "http://h" }, null, {
      fetch: async () => new Response("bad gateway", { status: 502, statusText: "Bad Gateway" }),
    });
    const result = await client.request("GET", "/x");
    expect(result).toMatchObject({ kind: "Problem", status: 502 });
  });
});

describe("problems for humans", () => {
  test("detail, reason and every field error", () => {
    expect(
      renderProblem("submit", {
        type: "t",
        title: "Invalid request",
        status: 400,
        detail: "invalid: profile",
        errors: [{ path: "profile", message: "unknown profile" }],
        reason: "ISOLATION_UNAVAILABLE",
      }),
    ).toBe(
      "openai4s submit: invalid: profile\n  reason: ISOLATION_UNAVAILABLE\n  profile: unknown profile\n",
    );
  });
  test("a refused token names the CLI's ways to give one, not only the HTTP header", () => {
    const text = renderProblem("list", {
      type: "t",
      title: "Unauthorized",
      status: 401,
      detail: "a valid token is required: Authorization: Bearer TOKEN",
    });
    expect(text).toContain("--token-file FILE");
    expect(text).toContain("OPENAI4S_TOKEN");
    expect(text).toContain("openai4s token issue NAME");
  });
  test("exit codes: bad input and bad credentials are 2, the rest 1", () => {
    expect([400, 401, 413, 404, 409, 500, 503].map(problemExitCode)).toEqual([2, 2, 2, 1, 1, 1, 1]);
  });
});
