/**
 * The CLI proves its user to the daemon with MUNGE (issue 32): no token on the login node.
 * Each request gets its own credential from `munge`, whose payload binds it to that request
 * and that daemon's address (adapters/identity-munge/munge-payload.ts), so a credential
 * read off the wire is worthless for any other request or daemon, and munged refuses it a
 * second time.
 */
import type { ServerAddress } from "./api-client.ts";

/** What a request's credential binds: the audience the daemon checks it against. */
export function mungeAudience(server: ServerAddress): string {
  return server.kind === "unix" ? `unix:${server.path}` : `tcp:${new URL(server.baseUrl).host}`;
}

export type MungeSigner = (method: string, path: string, server: ServerAddress) => Promise<string>;

/** A signer over the `munge` program (`socket`: munged's, else the site's default). */
export function mungeSigner(socket: string | null): MungeSigner {
  return async (method, path, server) => {
    // Loaded only where MUNGE is used: a command with a token or a local socket does not
    // load a module for it (issue 34: each module costs a short command about 0.2 ms).
    const { mungePayload } = await import("../../adapters/identity-munge/munge-payload.ts");
    const payload = mungePayload({ method, path, audience: mungeAudience(server) });
    const child = Bun.spawn(["munge", ...(socket === null ? [] : ["-S", socket]), "-s", payload], {
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
      timeout: 5_000,
    });
    const [out, err, code] = await Promise.all([
      new Response(child.stdout).text(),
      new Response(child.stderr).text(),
      child.exited,
    ]);
    if (code !== 0) {
      throw new Error(`munge could not make a credential: ${err.trim() || `exit ${code}`}`);
    }
    return `MUNGE ${out.trim()}`;
  };
}
