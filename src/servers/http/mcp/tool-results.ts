/**
 * Refusals as a model can act on them: a tool result with `isError` carrying the problem
 * the HTTP API would answer (reason, detail, the fields at fault, a hint), never a protocol
 * failure. Malformed arguments are the one exception the protocol names: JSON-RPC invalid
 * params, naming each field.
 */

import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";
import * as v from "valibot";
import { ApiError } from "../problem.ts";

/** The problem's words first (what a model reads), then the whole problem as JSON. */
export function problemResult(error: ApiError): CallToolResult {
  const fields = error.errors.map((e) => `\n- ${e.path || "(arguments)"}: ${e.message}`).join("");
  const text = `${error.title} (${error.reason}): ${error.detail}${fields}`;
  return {
    isError: true,
    content: [
      { type: "text", text },
      { type: "text", text: JSON.stringify(error.body()) },
    ],
  };
}

/** A tool's arguments checked against its schema; each issue named by its field. */
export function parseArguments<const S extends v.GenericSchema>(
  tool: string,
  schema: S,
  input: unknown,
): v.InferOutput<S> {
  const result = v.safeParse(schema, input ?? {}, { abortEarly: false });
  if (result.success) return result.output;
  const named = result.issues.map((issue) => {
    const path = v.getDotPath(issue) ?? "";
    if (issue.type === "strict_object" && issue.expected === "never") {
      return `${path}: unknown argument "${path.split(".").at(-1)}"`;
    }
    if (issue.type === "strict_object" && issue.input === undefined && path !== "") {
      return `${path}: required argument "${path.split(".").at(-1)}" is missing`;
    }
    return `${path || "(arguments)"}: ${issue.message}`;
  });
  throw new McpError(
    ErrorCode.InvalidParams,
    `invalid arguments for ${tool}: ${named.join("; ")}`,
    {
      errors: named,
    },
  );
}

/** Runs a tool; an ApiError (a refusal the HTTP API would answer) becomes an error result. */
export async function asToolResult(run: () => Promise<CallToolResult>): Promise<CallToolResult> {
  try {
    return await run();
  } catch (error) {
    if (error instanceof ApiError) return problemResult(error);
    throw error;
  }
}
