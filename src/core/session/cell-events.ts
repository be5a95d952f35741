/**
 * A cell's outputs as the events of its log (cell-log.ts), named and shaped as the streaming
 * exec sends them (docs/sessions.md): the live stream and a re-attached one read the same log.
 */
import type { CellLog } from "./cell-log.ts";
import type { ExecOutcome, ExecOutput } from "./session-port.ts";

/** Streams and displays go to the log as they come; the final result or error goes last. */
export function logOutput(log: CellLog, cell: string, output: ExecOutput): void {
  switch (output.type) {
    case "stream":
      log.append(cell, output.name, { text: output.text });
      return;
    case "display_data":
      log.append(cell, "display", { data: output.data });
      return;
    case "execute_result":
    case "error":
      return; // the final event carries it, with kernelRestarted
    default: {
      const never: never = output;
      throw new Error(`unhandled output ${JSON.stringify(never)}`);
    }
  }
}

/** The one final event of a cell; `null`: the exec threw (a bug), still an end for readers. */
export function finalEvent(outcome: ExecOutcome | null): [string, Record<string, unknown>] {
  if (outcome?.kind === "Ok") {
    const final = outcome.outputs.at(-1);
    if (final?.type === "error") {
      const { type: _type, ...error } = final;
      return ["error", { status: "ERROR", ...error, kernelRestarted: outcome.kernelRestarted }];
    }
    return [
      "result",
      {
        status: "OK",
        data: final?.type === "execute_result" ? final.data : null,
        kernelRestarted: outcome.kernelRestarted,
      },
    ];
  }
  const message =
    outcome === null
      ? "the daemon failed while running this cell"
      : outcome.kind === "NotReady"
        ? outcome.message
        : "no such session";
  return [
    "error",
    {
      status: "ERROR",
      ename: "SessionNotReady",
      evalue: message,
      traceback: message,
      kernelRestarted: false,
    },
  ];
}
