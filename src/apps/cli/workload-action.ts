/**
 * `openai4s ACTION ID`, the commands that are one POST to /v1/workloads/ID/ACTION (cancel,
 * interrupt, restart): the ID checked, a failure reported as every command reports one, and
 * the answer printed as JSON with --json, else by the command's own words.
 */
import type { Command, CommandIo } from "../../lib/command/command.ts";
import {
  type ClientRuntime,
  createClientCommand,
  encodeId,
  oneId,
  printJson,
  reportFailure,
} from "./client.ts";

export interface WorkloadActionSpec<T> {
  /** The command's name, which is also the action's path segment. */
  readonly name: string;
  readonly summary: string;
  readonly help: string;
  /** The answer, for a person. */
  readonly print: (body: T, io: CommandIo) => void;
  /** The exit status an answer means (with --json too); default 0. */
  readonly status?: (body: T) => number;
}

export function createWorkloadActionCommand<T>(
  runtime: ClientRuntime,
  spec: WorkloadActionSpec<T>,
): Command {
  return createClientCommand(runtime, {
    name: spec.name,
    summary: spec.summary,
    help: spec.help,
    options: {},
    async run({ positionals, io, json, connect }) {
      const id = oneId(spec.name, positionals);
      const result = await (await connect()).request<T>(
        "POST",
        `/v1/workloads/${encodeId(id)}/${spec.name}`,
      );
      if (result.kind !== "Ok") return reportFailure(spec.name, result, io, json);
      if (json) printJson(io, result.body);
      else spec.print(result.body, io);
      return spec.status?.(result.body) ?? 0;
    },
  });
}
