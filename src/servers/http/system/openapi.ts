/**
 * `/openapi.json`, generated: paths from the route contract, request and response schemas
 * converted from the valibot schemas that validate requests and describe responses. Nothing
 * in it is written by hand but prose, so it cannot drift from what the API accepts and sends.
 */
import { type JsonSchema, toJsonSchema } from "@valibot/to-json-schema";
import type * as v from "valibot";
import { ProblemSchema, ReasonSchema } from "../view-schemas.ts";
import { type Body, OPERATIONS, type Operation } from "./contract.ts";

type Json = Record<string, unknown>;

/**
 * JSON Schema of a valibot schema. Checks that JSON Schema cannot state (a custom refusal of
 * credential-shaped names, say) are left out, not guessed at: they are in the descriptions.
 * "output" types a pipeline by its last schema: a query's string stays a string.
 */
export function jsonSchemaOf(schema: v.GenericSchema): Json {
  const out = toJsonSchema(schema, { errorMode: "ignore", typeMode: "output" }) as JsonSchema &
    Json;
  delete out["$schema"];
  return out;
}

const problem = (description: string) => ({
  description,
  content: { "application/problem+json": { schema: { $ref: "#/components/schemas/Problem" } } },
});

function content(body: Body): Json {
  switch (body.kind) {
    case "json":
      return { "application/json": { schema: jsonSchemaOf(body.schema) } };
    case "raw":
      return {
        [body.contentType]: { schema: { type: "string", description: body.description } },
      };
    default: {
      const never: never = body;
      throw new Error(`unhandled body ${JSON.stringify(never)}`);
    }
  }
}

function parameters(op: Operation): Json[] {
  const out: Json[] = [];
  for (const match of op.path.matchAll(/\{([^}]+)\}/g)) {
    out.push({
      name: match[1],
      in: "path",
      required: true,
      schema: { type: "string" },
      description: "The workload's id.",
    });
  }
  if (op.query) {
    const schema = jsonSchemaOf(op.query.schema);
    const required = (schema["required"] as string[] | undefined) ?? [];
    const properties = (schema["properties"] ?? {}) as Record<string, Json>;
    for (const [name, property] of Object.entries(properties)) {
      const { description, ...rest } = property;
      out.push({ name, in: "query", required: required.includes(name), description, schema: rest });
    }
  }
  for (const header of op.headers ?? []) {
    out.push({
      name: header.name,
      in: "header",
      required: false,
      description: header.description,
      schema: { type: "string" },
    });
  }
  return out;
}

function operation(op: Operation): Json {
  const responses: Json = {};
  for (const [status, ok] of Object.entries(op.ok)) {
    responses[status] = { description: ok.description, content: content(ok.body) };
  }
  for (const [status, description] of Object.entries(op.problems)) {
    responses[status] = problem(description);
  }
  // Every route refuses a query parameter it does not define or one given twice, and
  // every POST a body that stops arriving (request-shape.ts, validation.ts).
  responses["400"] ??= problem(
    "An unknown or repeated query parameter, or a body the route does not take.",
  );
  if (op.method === "POST") {
    responses["408"] = problem("The body did not arrive in time; the connection is closed.");
  }
  responses["401"] = problem("TCP listener: missing or wrong bearer token.");
  responses["500"] = problem("The daemon failed; its log has the details.");
  return {
    operationId: op.operationId,
    summary: op.summary,
    parameters: parameters(op),
    ...(op.body
      ? {
          requestBody: {
            required: true,
            content: { "application/json": { schema: jsonSchemaOf(op.body.schema) } },
          },
        }
      : {}),
    ...(op.rawBody
      ? {
          requestBody: {
            required: true,
            content: {
              [op.rawBody.contentType]: {
                schema: { type: "string", format: "binary", description: op.rawBody.description },
              },
            },
          },
        }
      : {}),
    responses,
  };
}

export function openApiDocument(version: string): Json {
  const paths: Record<string, Json> = {};
  for (const op of OPERATIONS) {
    paths[op.path] = { ...paths[op.path], [op.method.toLowerCase()]: operation(op) };
  }
  return {
    openapi: "3.1.0",
    info: {
      title: "openai4s",
      version,
      description:
        "Control plane for sessions and batch jobs. Errors are application/problem+json with a stable UPPER_SNAKE `reason`; unknown request fields are refused with 400.",
    },
    components: {
      securitySchemes: {
        adminToken: {
          type: "http",
          scheme: "bearer",
          description:
            "Required on TCP listeners: the content of STATE_DIR/admin-token. The unix socket is protected by its file mode instead.",
        },
      },
      schemas: { Problem: jsonSchemaOf(ProblemSchema), Reason: jsonSchemaOf(ReasonSchema) },
    },
    security: [{}, { adminToken: [] }],
    paths,
  };
}
