/**
 * The line a cell goes to kernel.py as: its id, its code or Jupyter request, and its own
 * output cap when the client lowered it (kernel.py takes the smaller of it and its own).
 */
import type { Cell } from "./kernel.ts";

export function cellLine(cell: Cell): Readonly<Record<string, unknown>> {
  const cap = cell.maxOutputChars === undefined ? {} : { max_output_chars: cell.maxOutputChars };
  if (cell.jupyter === undefined) return { id: cell.id, ...cap, code: cell.code };
  return {
    id: cell.id,
    ...cap,
    jupyter: {
      msg_type: cell.jupyter.msgType,
      content: cell.jupyter.content,
      buffers: cell.jupyter.buffers ?? [],
    },
  };
}
