/**
 * A Jupyter client lowers one cell's output cap (issue 30) the way it attaches anything to a
 * cell: the execute_request's metadata, `{"openai4s": {"max_output_chars": N}}`. The hub
 * hands it to the kernel with the request; anything else there is no cap of its own.
 */
import { describe, expect, test } from "bun:test";
import type {
  JupyterRequestOptions,
  JupyterService,
} from "../../src/core/session/jupyter-service.ts";
import { manualTimeline } from "../../src/lib/clock.ts";
import { silentLog } from "../../src/lib/log.ts";
import { createKernelHubs, type KernelSocket } from "../../src/servers/http/jupyter/hub.ts";
import { parseClientMessage } from "../../src/servers/http/jupyter/messages.ts";
import { eventually } from "../support/eventually.ts";

function execute(metadata: unknown): string {
  return JSON.stringify({
    channel: "shell",
    header: { msg_id: "m1", msg_type: "execute_request", session: "s" },
    metadata,
    content: { code: "print('x' * 10**6)" },
  });
}

describe("a cell's own output cap in its metadata", () => {
  test("is read from openai4s.max_output_chars as a positive whole number, else absent", () => {
    const cap = (metadata: unknown) => {
      const parsed = parseClientMessage(execute(metadata));
      if (typeof parsed === "string") throw new Error(parsed);
      return parsed.maxOutputChars;
    };
    expect(cap({ openai4s: { max_output_chars: 300 } })).toBe(300);
    for (const ignored of [
      undefined,
      {},
      { openai4s: null },
      { openai4s: { max_output_chars: 0 } },
      { openai4s: { max_output_chars: -1 } },
      { openai4s: { max_output_chars: 2.5 } },
      { openai4s: { max_output_chars: "300" } },
      { max_output_chars: 300 },
    ]) {
      expect(cap(ignored)).toBeUndefined();
    }
  });

  test("reaches the kernel's request with the cell", async () => {
    const seen: JupyterRequestOptions[] = [];
    const service: Pick<
      JupyterService,
      "standing" | "standingChanged" | "request" | "onOutput" | "restart"
    > = {
      standing: () => ({ kind: "Ready" }),
      // Always READY: nothing ever changes, so a waiter is only let go by its abort.
      standingChanged: (_id, signal) =>
        new Promise<void>((resolve) => signal?.addEventListener("abort", () => resolve())),
      request: async (_id, _type, _content, options = {}) => {
        seen.push(options);
        return {
          kind: "Reply",
          msgType: "execute_reply",
          content: { status: "ok" },
          kernelRestarted: false,
        };
      },
      onOutput: () => () => {},
      restart: async () => ({ kind: "Restarted" }),
    };
    const hubs = createKernelHubs({
      jupyter: service as JupyterService,
      interrupt: async () => ({ kind: "Ok", interrupted: false }),
      shutdown: () => {},
      presence: { seen() {}, whileRunning: () => () => {} },
      now: () => 0,
      timers: manualTimeline(),
      log: silentLog,
    });
    const socket: KernelSocket = { send: () => {}, close: () => {} };
    const client = hubs.connect("w-1", socket);
    client.onMessage(execute({ openai4s: { max_output_chars: 300 } }));
    client.onMessage(execute({}));
    await eventually(() => seen.length === 2, { what: "both requests handed over" });
    expect(seen.map((o) => o.maxOutputChars)).toEqual([300, undefined]);
    hubs.closeAll("test over");
  });
});
