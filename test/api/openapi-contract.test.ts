/**
 * The generated contract: every field of every request and response schema is documented
 * (and the check demonstrably fails for one that is not), every refusal's reason is listed,
 * and real responses of the API parse with the strict schemas the document is made from,
 * so a field added to a response without its schema fails here.
 */
import { afterEach, describe, expect, test } from "bun:test";
import * as v from "valibot";
import { DiagnosticsSchema, HealthSchema } from "../../src/servers/http/diagnostics-schema.ts";
import { PROBLEMS, type ProblemSlug, problemReason } from "../../src/servers/http/problem.ts";
import { jsonSchemaOf, openApiDocument } from "../../src/servers/http/system/openapi.ts";
import {
  EventListSchema,
  ExecResultSchema,
  InterruptResultSchema,
  ProblemSchema,
  ProfileListSchema,
  WorkloadListSchema,
  WorkloadSchema,
} from "../../src/servers/http/view-schemas.ts";
import { type Harness, harness } from "../support/api-harness.ts";
import { fakeBackend } from "../support/fake-backend.ts";

const open: Harness[] = [];
function make(options: Parameters<typeof harness>[0] = {}): Harness {
  const h = harness(options);
  open.push(h);
  return h;
}
afterEach(() => {
  for (const h of open.splice(0)) h.close();
});

/** Every `properties` entry and every parameter without a description, by JSON path. */
export function undocumented(node: unknown, at = "$"): string[] {
  if (Array.isArray(node)) return node.flatMap((item, i) => undocumented(item, `${at}[${i}]`));
  if (node === null || typeof node !== "object") return [];
  const object = node as Record<string, unknown>;
  const out: string[] = [];
  if (typeof object["in"] === "string" && typeof object["name"] === "string") {
    if (!nonEmpty(object["description"])) out.push(`${at} (parameter ${object["name"]})`);
  }
  const properties = object["properties"];
  if (properties !== null && typeof properties === "object" && !Array.isArray(properties)) {
    for (const [name, schema] of Object.entries(properties)) {
      if (!nonEmpty((schema as Record<string, unknown>)["description"])) {
        out.push(`${at}.properties.${name}`);
      }
    }
  }
  for (const [key, value] of Object.entries(object))
    out.push(...undocumented(value, `${at}.${key}`));
  return out;
}

function nonEmpty(value: unknown): boolean {
  return typeof value === "string" && value.trim().length > 0;
}

describe("generated OpenAPI document", () => {
  test("every request and response field, and every parameter, is documented", () => {
    expect(undocumented(openApiDocument("x"))).toEqual([]);
  });

  test("the check fails for a schema field added without a description", () => {
    const grown = v.strictObject({
      code: v.pipe(v.string(), v.description("documented")),
      added: v.optional(v.number()),
      nested: v.pipe(
        v.strictObject({ inner: v.string() }),
        v.description("documented, its field not"),
      ),
    });
    expect(undocumented(jsonSchemaOf(grown))).toEqual([
      "$.properties.added",
      "$.properties.nested.properties.inner",
    ]);
  });

  test("the problem reason lists every refusal the API can make", () => {
    const doc = openApiDocument("x") as {
      components: { schemas: { Problem: { properties: { reason: { enum: string[] } } } } };
    };
    const listed = doc.components.schemas.Problem.properties.reason.enum;
    expect([...listed].sort()).toEqual(
      Object.keys(PROBLEMS)
        .map((slug) => problemReason(slug as ProblemSlug))
        .sort(),
    );
  });

  test("request bodies refuse unknown fields in the document as the API does", () => {
    const doc = openApiDocument("x") as {
      paths: Record<
        string,
        Record<
          string,
          {
            requestBody?: {
              content: Record<string, { schema: { additionalProperties?: unknown } }>;
            };
          }
        >
      >;
    };
    for (const ops of Object.values(doc.paths)) {
      for (const op of Object.values(ops)) {
        const schema = op.requestBody?.content["application/json"]?.schema;
        if (schema) expect(schema.additionalProperties).toBe(false);
      }
    }
  });
});

describe("real responses match the schemas the document is generated from", () => {
  const parse = async <S extends v.GenericSchema>(schema: S, res: Response) => {
    const body = await res.json();
    const result = v.safeParse(schema, body);
    if (!result.success) {
      throw new Error(
        `${JSON.stringify(body)}\n${result.issues.map((i) => `${v.getDotPath(i)}: ${i.message}`).join("\n")}`,
      );
    }
  };

  test("health, profiles, diagnostics, workloads, events, cancel, problems, exec", async () => {
    const h = make({
      backend: fakeBackend({
        capabilities: {
          sessionIsolation: {
            verifySessionIsolation: async () => ({ kind: "Verified", mechanism: "test" }),
          },
        },
      }),
      sessions: {
        exec: async () => ({
          kind: "Ok",
          status: "OK",
          output: "2\n",
          error: null,
          outputs: [{ type: "execute_result", data: { "text/plain": "2" } }],
          kernelRestarted: false,
        }),
        interrupt: async () => ({ kind: "Ok", interrupted: false }),
        restart: async () => ({ kind: "Ok", running: true, message: "the interpreter is running" }),
      },
    });
    h.tick = {
      startedAt: 1_700_000_000_000,
      durationMs: 3,
      backendCalls: { observe: 1 },
      backendCallsTotal: 1,
      backendUnavailable: false,
      error: null,
    };
    await parse(HealthSchema, await h.request("/healthz"));
    await parse(ProfileListSchema, await h.request("/v1/profiles"));
    await parse(DiagnosticsSchema, await h.request("/v1/diagnostics"));
    const created = await h.post("/v1/workloads", {
      kind: "BATCH",
      profile: "default",
      command: ["true"],
      env: { A: "1" },
    });
    const id = ((await created.clone().json()) as { id: string }).id;
    await parse(WorkloadSchema, created);
    const session = await h.post("/v1/workloads", { kind: "SESSION", profile: "interactive" });
    const sid = ((await session.clone().json()) as { id: string }).id;
    await parse(WorkloadSchema, session);
    await parse(WorkloadSchema, await h.request(`/v1/workloads/${sid}`));
    await parse(WorkloadListSchema, await h.request("/v1/workloads?limit=1"));
    await parse(EventListSchema, await h.request(`/v1/workloads/${id}/events`));
    await parse(WorkloadSchema, await h.post(`/v1/workloads/${id}/cancel`, {}));
    await parse(ProblemSchema, await h.request("/v1/workloads/w-none"));
    await parse(ProblemSchema, await h.post("/v1/workloads", { kind: "BATCH", extra: 1 }));
    await parse(ExecResultSchema, await h.post(`/v1/workloads/${sid}/exec`, { code: "1+1" }));
    await parse(InterruptResultSchema, await h.post(`/v1/workloads/${sid}/interrupt`, {}));
  });
});

describe("published query bounds are the enforced ones", () => {
  type Param = { name: string; in: string; schema: Record<string, unknown> };
  const document = openApiDocument("x") as {
    paths: Record<string, Record<string, { parameters: Param[] }>>;
  };
  const cases: [string, string, Param][] = [];
  for (const [path, methods] of Object.entries(document.paths)) {
    for (const [method, op] of Object.entries(methods)) {
      for (const p of op.parameters) if (p.in === "query") cases.push([method, path, p]);
    }
  }

  test("every integer query parameter states its minimum and maximum", () => {
    const integers = cases.filter(([, , p]) => p.schema["type"] === "integer");
    expect(integers.map(([, path, p]) => `${path}?${p.name}`).sort()).toEqual([
      "/v1/workloads/{id}/cells/{cell}/events?after",
      "/v1/workloads/{id}/files?limit",
      "/v1/workloads/{id}/logs?attempt",
      "/v1/workloads/{id}/logs?index",
      "/v1/workloads/{id}/logs?tail",
      "/v1/workloads?limit",
    ]);
    for (const [, , p] of integers) {
      expect(typeof p.schema["minimum"]).toBe("number");
      expect(typeof p.schema["maximum"]).toBe("number");
    }
  });

  test.each(cases)(
    "%s %s ?%p: the edges of the published schema are the server's",
    async (method, path, param) => {
      const h = make();
      // A workload that does not exist: a value the server accepts gets past validation to a
      // 404 (or 200 on a collection); one it refuses is a 400 naming the parameter.
      const url = (value: string) =>
        `${path.replace("{id}", "w-none")}?${param.name}=${encodeURIComponent(value)}`;
      const status = async (value: string) =>
        (await h.request(url(value), { method: method.toUpperCase() })).status;
      const schema = param.schema;
      const accepted: string[] = [];
      const refused: string[] = [];
      if (schema["type"] === "integer") {
        const min = schema["minimum"] as number;
        const max = schema["maximum"] as number;
        accepted.push(String(min), String(max));
        refused.push(String(min - 1), String(max + 1), "1.5", "x");
      } else if (Array.isArray(schema["enum"])) {
        accepted.push(...(schema["enum"] as string[]));
        refused.push("not-a-member");
      } else {
        return; // free text (a cursor): nothing to bound
      }
      for (const value of accepted)
        expect({ value, status: await status(value) }).not.toEqual({ value, status: 400 });
      for (const value of refused)
        expect({ value, status: await status(value) }).toEqual({ value, status: 400 });
    },
  );
});
