import { open, unlink } from "node:fs/promises";

const CHUNK_BYTES = 256 * 1024;

/** A file as a byte stream in bounded chunks; optionally unlinked once open. */
export async function fileStream(
  path: string,
  options: {
    readonly unlinkAfterOpen: boolean;
    /** Called once the last byte was handed on (not when the reader went away first). */
    readonly onEnd?: () => void;
  },
): Promise<ReadableStream<Uint8Array>> {
  const handle = await open(path, "r");
  if (options.unlinkAfterOpen) await unlink(path);
  let offset = 0;
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      const buffer = Buffer.alloc(CHUNK_BYTES);
      const { bytesRead } = await handle.read(buffer, 0, CHUNK_BYTES, offset);
      if (bytesRead === 0) {
        await handle.close();
        controller.close();
        options.onEnd?.();
        return;
      }
      offset += bytesRead;
      controller.enqueue(new Uint8Array(buffer.subarray(0, bytesRead)));
    },
    async cancel() {
      await handle.close();
    },
  });
}
