/**
 * Finding the daemon when no `--server` (or `$OPENAI4S_SERVER`) names it (issue 32): the
 * user's own daemon's socket first (its default state dir), then the site's, as the client
 * settings list them (client-config.ts): the admin's socket, the users' socket, the TCP
 * address. Each is tried in turn only while nothing was there to connect to (the request
 * was never delivered, so trying the next cannot do it twice); once one answers it is used
 * for the rest of the command. When none answers the error lists every place tried, and
 * suggests no second daemon where the site has one.
 */
import type { ApiClient, ApiResult, ServerAddress } from "./api-client.ts";

type Unreachable = Extract<ApiResult<never>, { readonly kind: "Unreachable" }>;

export function describeAddress(server: ServerAddress): string {
  return server.kind === "unix" ? `unix:${server.path}` : server.baseUrl;
}

function isUnreachable(value: unknown): value is Unreachable {
  return (value as { kind?: unknown } | null)?.kind === "Unreachable";
}

/**
 * One client over several addresses. `siteConfigured`: the site's settings named where its
 * daemon is (then a personal daemon is not suggested).
 */
export function fallbackClient(
  clients: readonly ApiClient[],
  settingsFile: string,
  siteConfigured: boolean,
): ApiClient {
  const head = clients[0];
  if (head === undefined) throw new Error("no address to try");
  const first: ApiClient = head;
  let current = 0;
  let answered = false;
  const tried = new Set<string>();
  async function attempt<R>(call: (client: ApiClient) => Promise<R>): Promise<R> {
    for (;;) {
      const client = clients[current] ?? first;
      const result = await call(client);
      if (!isUnreachable(result) || answered || result.neverConnected !== true) {
        if (!isUnreachable(result)) answered = true;
        return result;
      }
      tried.add(describeAddress(client.server));
      if (current + 1 >= clients.length) {
        return nothingAnswered([...tried], settingsFile, siteConfigured) as R;
      }
      current += 1;
    }
  }
  return {
    get server() {
      return (clients[current] ?? first).server;
    },
    request: (method, path, options) => attempt((c) => c.request(method, path, options)),
    open: (method, path, options) => attempt((c) => c.open(method, path, options)),
    stream: (path, method) => attempt((c) => c.stream(path, method)),
    send: (method, path, body) => attempt((c) => c.send(method, path, body)),
  } as ApiClient;
}

function nothingAnswered(
  tried: readonly string[],
  settingsFile: string,
  siteConfigured: boolean,
): Unreachable {
  const where = tried.map((t) => `  ${t}`).join("\n");
  const hint = siteConfigured
    ? `the site's daemon is listed in ${settingsFile}: ask its admin whether it is running`
    : `a site lists its daemon in ${settingsFile}; on your own machine \`openai4s serve\` starts one`;
  return {
    kind: "Unreachable",
    message: `no daemon answered at any place tried:\n${where}\n(${hint}; or point at one with --server or $OPENAI4S_SERVER)`,
    neverConnected: true,
  };
}
