/**
 * The MCP conformance suite (@modelcontextprotocol/conformance, the protocol's own) against
 * the built binary's /mcp, run and skipped scenarios printed. The suite connects without an
 * Authorization header, as a client configured with no token would; a small relay in front
 * adds the admin's token and passes every other header (Host, Origin) as sent, so the
 * DNS-rebinding scenario reaches the daemon's own check.
 *
 * Skipped: the scenarios that call the SDK's fixture server's own tools, prompts and
 * resources (tools-call-simple-text, prompts-*, ...), which a server with other tools
 * cannot have; logging and completion, which this server does not offer.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "../support/binary.ts";
import { type Daemon, ensureBuilt, freePort, startDaemon } from "../support/binary-daemon.ts";

export const RUN = [
  "server-initialize",
  "ping",
  "tools-list",
  "resources-list",
  "server-sse-polling",
  "server-sse-multiple-streams",
  "dns-rebinding-protection",
] as const;

const SKIPPED: Readonly<Record<string, string>> = {
  "logging-set-level": "no logging capability offered",
  "completion-complete": "no completions offered",
  "tools-call-simple-text": "calls the fixture server's own tool",
  "tools-call-image": "calls the fixture server's own tool",
  "tools-call-audio": "calls the fixture server's own tool",
  "tools-call-embedded-resource": "calls the fixture server's own tool",
  "tools-call-mixed-content": "calls the fixture server's own tool",
  "tools-call-with-logging": "calls the fixture server's own tool",
  "tools-call-error": "calls the fixture server's own tool",
  "tools-call-with-progress": "calls the fixture server's own tool",
  "tools-call-sampling": "calls the fixture server's own tool",
  "tools-call-elicitation": "calls the fixture server's own tool",
  "json-schema-2020-12": "calls the fixture server's own tool",
  "elicitation-sep1034-defaults": "calls the fixture server's own tool",
  "elicitation-sep1330-enums": "calls the fixture server's own tool",
  "resources-read-text": "reads the fixture server's own resource",
  "resources-read-binary": "reads the fixture server's own resource",
  "resources-templates-read": "reads the fixture server's own template",
  "resources-subscribe": "no subscriptions offered",
  "resources-unsubscribe": "no subscriptions offered",
  "prompts-list": "no prompts offered",
  "prompts-get-simple": "no prompts offered",
  "prompts-get-with-args": "no prompts offered",
  "prompts-get-embedded-resource": "no prompts offered",
  "prompts-get-with-image": "no prompts offered",
};

let d: Daemon;
let relay: ReturnType<typeof Bun.serve>;

beforeAll(async () => {
  ensureBuilt();
  const port = await freePort();
  d = await startDaemon({ args: ["--listen", `127.0.0.1:${port}`], gateway: false });
  const token = readFileSync(join(d.stateDir, "admin-token"), "utf8").trim();
  relay = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    idleTimeout: 0,
    async fetch(request) {
      const url = new URL(request.url);
      const headers = new Headers(request.headers);
      headers.set("Authorization", `Bearer ${token}`);
      const body =
        request.method === "GET" || request.method === "HEAD"
          ? undefined
          : await request.arrayBuffer();
      return fetch(`http://127.0.0.1:${port}${url.pathname}${url.search}`, {
        method: request.method,
        headers,
        ...(body !== undefined ? { body } : {}),
      });
    },
  });
}, 180_000);

afterAll(async () => {
  relay?.stop(true);
  await d?.stop();
});

test("the conformance suite's server scenarios that apply pass", async () => {
  const listed = Bun.spawnSync(
    [process.execPath, "node_modules/@modelcontextprotocol/conformance/dist/index.js", "list"],
    { cwd: ROOT },
  );
  const known = [
    ...listed.stdout
      .toString()
      .split("Client scenarios")[0]!
      .matchAll(/^\s+- ([a-z0-9-]+)/gm),
  ].map((m) => m[1] as string);
  // Every server scenario of this version of the suite is either run or skipped with a why.
  expect(known.filter((s) => !RUN.includes(s as never) && SKIPPED[s] === undefined)).toEqual([]);
  console.log(
    `skipped: ${Object.entries(SKIPPED)
      .map(([s, why]) => `${s} (${why})`)
      .join(", ")}`,
  );
  const failed: string[] = [];
  for (const scenario of RUN) {
    const run = Bun.spawn(
      [
        process.execPath,
        "node_modules/@modelcontextprotocol/conformance/dist/index.js",
        "server",
        "--url",
        `http://127.0.0.1:${relay.port}/mcp`,
        "--scenario",
        scenario,
      ],
      { cwd: ROOT, stdout: "pipe", stderr: "pipe" },
    );
    const [out, err, code] = await Promise.all([
      new Response(run.stdout).text(),
      new Response(run.stderr).text(),
      run.exited,
    ]);
    const ok = code === 0 && !/FAIL/i.test(out.replace(/0 failed/gi, ""));
    console.log(`run: ${scenario} ${ok ? "passed" : "FAILED"}`);
    if (!ok) failed.push(`${scenario}:\n${out}\n${err}`);
  }
  expect(failed).toEqual([]);
}, 300_000);
