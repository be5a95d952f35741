/**
 * The server-sent-events body of a streaming exec: a bounded buffer whose policy is to drop
 * output (never the final event) while the client is behind, and to say so in place.
 */
import { describe, expect, test } from "bun:test";
import { manualTimeline } from "../../src/lib/clock.ts";
import { createEventStream } from "../../src/servers/http/workloads/event-stream.ts";

async function readAll(body: ReadableStream<Uint8Array>): Promise<string> {
  return new Response(body).text();
}

describe("event stream", () => {
  test("events are framed as SSE, in order, and the stream ends at close", async () => {
    const s = createEventStream({
      maxBufferedBytes: 1 << 20,
      keepaliveMs: 60_000,
      timers: manualTimeline(),
    });
    s.push("stdout", { text: "a\nb" }, { droppable: true });
    s.push("result", { status: "OK", data: null, kernelRestarted: false });
    s.close();
    expect(await readAll(s.body)).toBe(
      'event: stdout\ndata: {"text":"a\\nb"}\n\nevent: result\ndata: {"status":"OK","data":null,"kernelRestarted":false}\n\n',
    );
  });

  test("a client that does not read loses output beyond the cap, is told how much, and still gets the result", async () => {
    const s = createEventStream({
      maxBufferedBytes: 1000,
      keepaliveMs: 60_000,
      timers: manualTimeline(),
    });
    for (let i = 0; i < 100; i++) s.push("stdout", { text: `line ${i}\n` }, { droppable: true });
    s.push("result", { status: "OK", data: null, kernelRestarted: false });
    s.close();
    const text = await readAll(s.body);
    const lines = text.match(/line \d+/g) ?? [];
    expect(lines.length).toBeGreaterThan(5);
    expect(lines.length).toBeLessThan(100);
    expect(lines[0]).toBe("line 0"); // the oldest kept, the newest dropped: no reordering
    const dropped = /event: dropped\ndata: (.*)\n/.exec(text);
    expect(dropped).not.toBeNull();
    expect(JSON.parse(dropped![1]!).outputs).toBe(100 - lines.length);
    expect(
      text.endsWith('event: result\ndata: {"status":"OK","data":null,"kernelRestarted":false}\n\n'),
    ).toBe(true);
  });

  test("a client that cancels the body aborts the stream's signal", async () => {
    const s = createEventStream({
      maxBufferedBytes: 1000,
      keepaliveMs: 60_000,
      timers: manualTimeline(),
    });
    expect(s.cancelled.aborted).toBe(false);
    await s.body.cancel();
    expect(s.cancelled.aborted).toBe(true);
    s.push("stdout", { text: "after" }, { droppable: true }); // harmless
    s.close();
  });
});
