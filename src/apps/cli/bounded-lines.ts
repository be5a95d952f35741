/**
 * stdin for `openai4s mcp`, in whole lines of at most `maxLineBytes`. The SDK's stdio reader
 * buffers until a newline, so an agent that wrote a message without end (or a 2 GiB one)
 * grew this process without bound; the daemon would refuse such a message anyway (its body
 * cap). A longer line is dropped whole, up to its newline, holding at most the cap meanwhile,
 * and `onDropped` is told its size so the agent gets an answer instead of silence.
 */
import { Transform } from "node:stream";

const NEWLINE = 0x0a;

export function boundedLines(
  maxLineBytes: number,
  onDropped: (lineBytes: number) => void,
): Transform {
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  let dropped: number | null = null;
  return new Transform({
    transform(chunk: Buffer, _encoding, done) {
      let start = 0;
      while (start < chunk.length) {
        const newline = chunk.indexOf(NEWLINE, start);
        const end = newline === -1 ? chunk.length : newline + 1;
        const piece = chunk.subarray(start, end);
        start = end;
        const contentBytes = pendingBytes + piece.length - (newline === -1 ? 0 : 1);
        if (dropped !== null) dropped += piece.length;
        else if (contentBytes > maxLineBytes) {
          dropped = pendingBytes + piece.length;
          pending = [];
          pendingBytes = 0;
        } else {
          pending.push(piece);
          pendingBytes += piece.length;
        }
        if (newline === -1) continue;
        if (dropped !== null)
          onDropped(dropped - 1); // its newline is no part of it
        else this.push(Buffer.concat(pending));
        dropped = null;
        pending = [];
        pendingBytes = 0;
      }
      done();
    },
  });
}
