/**
 * The CLI finds the site's daemon (issue 32): with no --server, the user's own daemon's
 * socket, then the places the site's client settings list (`$OPENAI4S_CLIENT_CONFIG`, else
 * /etc/openai4s/client.toml); when nothing answers, every place tried is named and no second
 * daemon is suggested. Real sockets: a stand-in daemon answers on the users' socket only.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { main } from "../../src/main.ts";
import { captureIo } from "../support/cli-runtime.ts";
import { tempDir } from "../support/temp-dir.ts";

const stops: (() => void)[] = [];
afterEach(() => {
  for (const stop of stops.splice(0)) stop();
});

async function run(args: readonly string[], env: Record<string, string>) {
  const io = captureIo(env);
  const code = await main("openai4s", args, io);
  return { code, err: io.err(), out: io.out() };
}

/** A stand-in daemon on a unix socket: answers the listing, records what it was sent. */
function standIn(path: string): { seen: string[] } {
  const seen: string[] = [];
  const server = Bun.serve({
    unix: path,
    fetch(request) {
      seen.push(`${request.method} ${new URL(request.url).pathname}`);
      return Response.json({ items: [], nextCursor: null });
    },
  });
  stops.push(() => server.stop(true));
  return { seen };
}

describe("the site's daemon, from the client settings", () => {
  test("no personal daemon: the users' socket the site lists answers", async () => {
    using scratch = tempDir("o4s-site-");
    const dir = scratch.path;
    const users = join(dir, "users.sock");
    const settings = join(dir, "client.toml");
    writeFileSync(
      settings,
      `admin_socket = "${join(dir, "admin.sock")}"\nsocket = "${users}"\nserver = "http://127.0.0.1:9"\n`,
    );
    const daemon = standIn(users);
    const env = {
      OPENAI4S_CLIENT_CONFIG: settings,
      OPENAI4S_STATE_DIR: join(dir, "mine"),
    };
    const { code, err } = await run(["list"], env);
    expect(err).toBe("");
    expect(code).toBe(0);
    expect(daemon.seen).toEqual(["GET /v1/workloads"]);
  });

  test("nothing answers: every place tried is named, and no second daemon is suggested", async () => {
    using scratch = tempDir("o4s-site-");
    const dir = scratch.path;
    const settings = join(dir, "client.toml");
    const admin = join(dir, "admin.sock");
    const users = join(dir, "users.sock");
    writeFileSync(
      settings,
      `admin_socket = "${admin}"\nsocket = "${users}"\nserver = "http://127.0.0.1:9"\n`,
    );
    const mine = join(dir, "mine");
    const { code, err } = await run(["list"], {
      OPENAI4S_CLIENT_CONFIG: settings,
      OPENAI4S_STATE_DIR: mine,
    });
    expect(code).toBe(1);
    for (const place of [
      `unix:${join(mine, "api.sock")}`,
      `unix:${admin}`,
      `unix:${users}`,
      "http://127.0.0.1:9",
    ]) {
      expect(err).toContain(place);
    }
    expect(err).toContain(settings);
    expect(err).not.toContain("openai4s serve");
  });

  test("a mistake in the settings stops the command naming the file and the key", async () => {
    using scratch = tempDir("o4s-site-");
    const settings = join(scratch.path, "client.toml");
    writeFileSync(settings, `sockett = "/run/openai4s/users.sock"\n`);
    const { code, err } = await run(["list"], {
      OPENAI4S_CLIENT_CONFIG: settings,
      OPENAI4S_STATE_DIR: join(scratch.path, "mine"),
    });
    expect(code).toBe(2);
    expect(err).toContain(`${settings}: unknown key "sockett"`);
  });

  test("--server still names exactly one daemon: the settings' places are not tried", async () => {
    using scratch = tempDir("o4s-site-");
    const dir = scratch.path;
    const users = join(dir, "users.sock");
    const settings = join(dir, "client.toml");
    writeFileSync(settings, `socket = "${users}"\n`);
    const daemon = standIn(users);
    const elsewhere = join(dir, "other.sock");
    const { code, err } = await run(["list", "--server", `unix:${elsewhere}`], {
      OPENAI4S_CLIENT_CONFIG: settings,
    });
    expect(code).toBe(1);
    expect(err).toContain(`no daemon is running at unix:${elsewhere}`);
    expect(daemon.seen).toEqual([]);
  });
});
