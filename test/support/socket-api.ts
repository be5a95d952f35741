/**
 * A client of a test daemon's API on its unix socket (which needs no token), for the tests
 * that drive an in-process daemon: a JSON body out, the status, text and parsed JSON back.
 */
import { eventually } from "./eventually.ts";

export interface ApiAnswer {
  readonly status: number;
  readonly text: string;
  /** The body parsed when it is JSON, else empty. */
  readonly body: Record<string, unknown>;
}

/** One request to the daemon's API; a body is sent as JSON. */
export type SocketApi = (method: string, path: string, body?: unknown) => Promise<ApiAnswer>;

/** A client of the API on `socket` (the unix socket needs no token). */
export function socketApi(socket: string): SocketApi {
  return async (method, path, body) => {
    const response = await fetch(`http://localhost${path}`, {
      unix: socket,
      method,
      ...(body === undefined
        ? {}
        : { headers: { "content-type": "application/json" }, body: JSON.stringify(body) }),
    });
    const text = await response.text();
    const json = response.headers.get("content-type")?.includes("json") === true;
    return {
      status: response.status,
      text,
      body: (json ? JSON.parse(text) : {}) as Record<string, unknown>,
    };
  };
}

/** The workload's view once its phase is one of `phases`; throws with the last view after. */
export function waitForPhase(
  api: SocketApi,
  id: string,
  phases: readonly string[],
  timeoutMs: number,
  intervalMs = 250,
): Promise<Record<string, unknown>> {
  return eventually(
    async () => {
      const { body } = await api("GET", `/v1/workloads/${id}`);
      if (phases.includes(String(body["phase"]))) return body;
      throw new Error(`workload ${id} still ${JSON.stringify(body)}`);
    },
    { timeoutMs, intervalMs },
  );
}
