/**
 * The OpenAPI 3.1 document of every route. Written by hand, with the limits taken from the
 * same constants the validators use; test/api/openapi.test.ts proves that every registered
 * route is documented and every documented route is registered.
 */
import { CONDITION_TYPES, PHASES, REASONS, WORKLOAD_KINDS } from "../../orchestration/models.ts";
import {
  ENV_KEY_PATTERN,
  IDEMPOTENCY_KEY_PATTERN,
  LIMITS,
  NAME_PATTERN,
} from "../workloads/schemas.ts";

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const nullable = (type: string, extra: Record<string, unknown> = {}) => ({
  type: [type, "null"],
  ...extra,
});
const dateTime = { type: "string", format: "date-time" };
const nullableDateTime = nullable("string", { format: "date-time" });

const json = (schema: unknown) => ({ content: { "application/json": { schema } } });
const problem = (description: string) => ({
  description,
  content: { "application/problem+json": { schema: ref("Problem") } },
});
const idParameter = {
  name: "id",
  in: "path",
  required: true,
  schema: { type: "string" },
  description: "Workload id",
};
const commonProblems = {
  "401": problem("TCP listener: missing or wrong bearer token"),
  "500": problem("The daemon failed; its log has the details"),
};

const command = {
  type: "array",
  minItems: 1,
  maxItems: LIMITS.commandMaxArgs,
  items: { type: "string", maxLength: LIMITS.argMaxLength },
  description: "argv, run without a shell. No NUL in any argument.",
};

export function openApiDocument(version: string) {
  return {
    openapi: "3.1.0",
    info: {
      title: "openai4s",
      version,
      description:
        "Control plane for sessions and batch jobs. Errors are application/problem+json; unknown request fields are refused with 400.",
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
      schemas: {
        Problem: {
          type: "object",
          required: ["type", "title", "status", "detail", "errors"],
          properties: {
            type: { type: "string" },
            title: { type: "string" },
            status: { type: "integer" },
            detail: { type: "string" },
            errors: {
              type: "array",
              items: {
                type: "object",
                required: ["path", "message"],
                properties: { path: { type: "string" }, message: { type: "string" } },
              },
            },
            reason: {
              type: "string",
              enum: [...REASONS],
              description: "Present on refusals with a reason code",
            },
          },
        },
        Phase: { type: "string", enum: [...PHASES] },
        Kind: { type: "string", enum: [...WORKLOAD_KINDS] },
        Condition: {
          type: "object",
          required: ["type", "status", "reason", "message", "lastTransitionTime"],
          properties: {
            type: { type: "string", enum: [...CONDITION_TYPES] },
            status: { type: "string", enum: ["TRUE", "FALSE", "UNKNOWN"] },
            reason: { type: "string" },
            message: { type: "string" },
            lastTransitionTime: dateTime,
          },
        },
        Allocation: {
          type: "object",
          required: ["id", "epoch", "phase", "reason", "submittedAt", "startedAt", "endedAt"],
          properties: {
            id: { type: "string" },
            epoch: { type: "integer" },
            phase: ref("Phase"),
            reason: nullable("string"),
            submittedAt: nullableDateTime,
            startedAt: nullableDateTime,
            endedAt: nullableDateTime,
          },
        },
        Workload: {
          type: "object",
          required: [
            "id",
            "kind",
            "name",
            "profile",
            "phase",
            "reason",
            "message",
            "specRevision",
            "executionEpoch",
            "createdAt",
            "updatedAt",
            "lastActiveAt",
            "exitCode",
            "conditions",
            "allocations",
          ],
          properties: {
            id: { type: "string" },
            kind: ref("Kind"),
            name: { type: "string" },
            profile: { type: "string" },
            phase: ref("Phase"),
            reason: nullable("string"),
            message: nullable("string"),
            specRevision: { type: "integer" },
            executionEpoch: { type: "integer" },
            createdAt: dateTime,
            updatedAt: dateTime,
            lastActiveAt: nullableDateTime,
            exitCode: nullable("integer"),
            conditions: {
              type: "array",
              items: ref("Condition"),
              description: "Empty for BATCH; the four readiness conditions and READY for SESSION.",
            },
            allocations: { type: "array", items: ref("Allocation") },
          },
        },
        SubmitRequest: {
          type: "object",
          additionalProperties: false,
          required: ["kind", "profile"],
          properties: {
            kind: ref("Kind"),
            profile: { type: "string", minLength: 1, maxLength: LIMITS.profileMaxLength },
            name: { type: "string", pattern: NAME_PATTERN.source },
            command: { ...command, description: "Required for BATCH, refused for SESSION." },
            env: {
              type: "object",
              maxProperties: LIMITS.envMaxEntries,
              propertyNames: { pattern: ENV_KEY_PATTERN.source, maxLength: LIMITS.envKeyMaxLength },
              additionalProperties: { type: "string", maxLength: LIMITS.envValueMaxLength },
              description: "Names starting with OPENAI4S_ are reserved.",
            },
            timeLimitSeconds: {
              type: "integer",
              minimum: 1,
              maximum: LIMITS.timeLimitMaxSeconds,
              description: "At most the profile's limit when it has one.",
            },
            idleTimeoutSeconds: {
              type: "integer",
              minimum: LIMITS.idleTimeoutMinSeconds,
              maximum: LIMITS.idleTimeoutMaxSeconds,
              description: "SESSION only.",
            },
            maxAttempts: {
              type: "integer",
              minimum: 1,
              maximum: LIMITS.maxAttemptsMax,
              default: 1,
            },
          },
        },
        WorkloadList: {
          type: "object",
          required: ["items", "nextCursor"],
          properties: {
            items: { type: "array", items: ref("Workload") },
            nextCursor: nullable("string"),
          },
        },
        Event: {
          type: "object",
          required: ["at", "phase", "reason", "message"],
          properties: {
            at: dateTime,
            phase: ref("Phase"),
            reason: nullable("string"),
            message: nullable("string"),
          },
        },
        Profile: {
          type: "object",
          required: ["name", "description", "kinds", "resources"],
          properties: {
            name: { type: "string" },
            description: { type: "string" },
            kinds: { type: "array", items: ref("Kind") },
            resources: {
              type: "object",
              required: ["nodes", "cpus", "gpus", "memoryMb", "timeLimitSeconds"],
              properties: {
                nodes: { type: "integer" },
                cpus: { type: "integer" },
                gpus: { type: "integer" },
                memoryMb: nullable("integer"),
                timeLimitSeconds: nullable("integer"),
              },
            },
          },
        },
        ExecRequest: {
          type: "object",
          additionalProperties: false,
          required: ["code"],
          properties: { code: { type: "string", maxLength: LIMITS.codeMaxLength } },
        },
        ExecResult: {
          type: "object",
          required: ["status", "output", "error", "outputs", "kernelRestarted"],
          properties: {
            status: { type: "string", enum: ["OK", "ERROR"] },
            output: { type: "string" },
            error: nullable("string"),
            // Jupyter's stream / display_data / execute_result / error contents (docs/sessions.md).
            outputs: {
              type: "array",
              items: {
                type: "object",
                required: ["type"],
                properties: {
                  type: {
                    type: "string",
                    enum: ["stream", "display_data", "execute_result", "error"],
                  },
                  name: { type: "string", enum: ["stdout", "stderr"] },
                  text: { type: "string" },
                  data: { type: "object", additionalProperties: { type: "string" } },
                  ename: { type: "string" },
                  evalue: { type: "string" },
                  traceback: { type: "string" },
                },
              },
            },
            kernelRestarted: { type: "boolean" },
          },
        },
        InterruptResult: {
          type: "object",
          required: ["interrupted"],
          properties: { interrupted: { type: "boolean" } },
        },
        TaskRequest: {
          type: "object",
          additionalProperties: false,
          required: ["command"],
          properties: {
            command,
            timeoutSeconds: {
              type: "integer",
              minimum: 1,
              maximum: LIMITS.taskTimeoutMaxSeconds,
              default: LIMITS.taskTimeoutDefaultSeconds,
            },
          },
        },
        TaskResult: {
          type: "object",
          required: ["exitCode", "stdout", "stderr"],
          properties: {
            exitCode: { type: "integer" },
            stdout: { type: "string" },
            stderr: { type: "string" },
          },
        },
        Diagnostics: {
          type: "object",
          required: ["version", "backend", "reconciler"],
          properties: {
            version: { type: "string" },
            backend: {
              type: "object",
              required: ["name", "healthy", "message", "calls"],
              properties: {
                name: { type: "string" },
                healthy: { type: "boolean" },
                message: { type: "string" },
                calls: { type: "object", additionalProperties: { type: "integer" } },
              },
            },
            reconciler: {
              type: "object",
              required: ["lastTick"],
              properties: {
                lastTick: {
                  type: ["object", "null"],
                  required: [
                    "startedAt",
                    "durationMs",
                    "backendCalls",
                    "backendCallsTotal",
                    "backendUnavailable",
                    "error",
                  ],
                  properties: {
                    startedAt: dateTime,
                    durationMs: { type: "number" },
                    backendCalls: {
                      type: "object",
                      additionalProperties: { type: "integer" },
                      description: "By port operation (observe, submit, cancel, ...)",
                    },
                    backendCallsTotal: { type: "integer" },
                    backendUnavailable: { type: "boolean" },
                    error: nullable("string"),
                  },
                },
              },
            },
          },
        },
      },
    },
    security: [{}, { adminToken: [] }],
    paths: {
      "/healthz": {
        get: {
          operationId: "health",
          summary: "Liveness",
          responses: {
            "200": {
              description: "The daemon answers",
              ...json({ type: "object", properties: { status: { const: "ok" } } }),
            },
            ...commonProblems,
          },
        },
      },
      "/v1/profiles": {
        get: {
          operationId: "listProfiles",
          summary: "Profiles the backend offers (public view)",
          responses: {
            "200": {
              description: "Profiles",
              ...json({
                type: "object",
                required: ["profiles"],
                properties: { profiles: { type: "array", items: ref("Profile") } },
              }),
            },
            ...commonProblems,
          },
        },
      },
      "/v1/workloads": {
        post: {
          operationId: "submitWorkload",
          summary: "Submit a BATCH job or start a SESSION",
          parameters: [
            {
              name: "Idempotency-Key",
              in: "header",
              required: false,
              schema: { type: "string", pattern: IDEMPOTENCY_KEY_PATTERN.source },
              description:
                "The same key with the same body returns the same workload (200); with a different body 409.",
            },
          ],
          requestBody: { required: true, ...json(ref("SubmitRequest")) },
          responses: {
            "201": { description: "Accepted", ...json(ref("Workload")) },
            "200": { description: "Replay of an Idempotency-Key", ...json(ref("Workload")) },
            "400": problem("Invalid request; errors names each field"),
            "409": problem(
              "Idempotency-Key reused with another body, or reason ISOLATION_UNAVAILABLE: the backend cannot isolate sessions",
            ),
            "413": problem("Body too large"),
            "415": problem("Content-Type names a format other than JSON"),
            ...commonProblems,
          },
        },
        get: {
          operationId: "listWorkloads",
          summary: "Workloads, newest first",
          parameters: [
            { name: "kind", in: "query", schema: ref("Kind") },
            { name: "phase", in: "query", schema: ref("Phase") },
            {
              name: "limit",
              in: "query",
              schema: {
                type: "integer",
                minimum: 1,
                maximum: LIMITS.listLimitMax,
                default: LIMITS.listLimitDefault,
              },
            },
            {
              name: "cursor",
              in: "query",
              schema: { type: "string" },
              description: "nextCursor of the previous page",
            },
          ],
          responses: {
            "200": { description: "A page", ...json(ref("WorkloadList")) },
            "400": problem("Invalid query"),
            ...commonProblems,
          },
        },
      },
      "/v1/workloads/{id}": {
        get: {
          operationId: "getWorkload",
          parameters: [idParameter],
          responses: {
            "200": { description: "The workload", ...json(ref("Workload")) },
            "404": problem("No such workload"),
            ...commonProblems,
          },
        },
      },
      "/v1/workloads/{id}/cancel": {
        post: {
          operationId: "cancelWorkload",
          summary: "Ask for the workload to stop (idempotent)",
          parameters: [idParameter],
          responses: {
            "202": { description: "Stop requested (or already done)", ...json(ref("Workload")) },
            "404": problem("No such workload"),
            ...commonProblems,
          },
        },
      },
      "/v1/workloads/{id}/exec": {
        post: {
          operationId: "execInSession",
          summary: "Run code in a READY session's kernel; counts as user activity",
          requestBody: { required: true, ...json(ref("ExecRequest")) },
          parameters: [
            idParameter,
            {
              name: "stream",
              in: "query",
              required: false,
              description:
                "1: answer with server-sent events as the code runs (as Accept: text/event-stream)",
              schema: { type: "string", enum: ["1", "true"] },
            },
          ],
          responses: {
            "200": {
              description:
                "The kernel ran the code (JSON), or its output as server-sent events (stdout, stderr, display, dropped, then result or error)",
              ...json(ref("ExecResult")),
            },
            "400": problem("Invalid request"),
            "415": problem("Content-Type names a format other than JSON"),
            "404": problem("No such workload or session"),
            "409": problem("Sessions disabled, not a session, ended, or not READY"),
            ...commonProblems,
          },
        },
      },
      "/v1/workloads/{id}/interrupt": {
        post: {
          operationId: "interruptSession",
          summary: "KeyboardInterrupt in the session's running cell; the kernel keeps its state",
          parameters: [idParameter],
          responses: {
            "200": { description: "Whether a cell was running", ...json(ref("InterruptResult")) },
            "404": problem("No such workload or session"),
            "409": problem("Sessions disabled, not a session, ended, or not READY"),
            ...commonProblems,
          },
        },
      },
      "/v1/workloads/{id}/tasks": {
        post: {
          operationId: "runTask",
          summary: "Run a step inside the workload's live allocation; never submits a new one",
          parameters: [idParameter],
          requestBody: { required: true, ...json(ref("TaskRequest")) },
          responses: {
            "200": { description: "The step ran", ...json(ref("TaskResult")) },
            "400": problem("Invalid request"),
            "415": problem("Content-Type names a format other than JSON"),
            "404": problem("No such workload"),
            "409": problem("The backend cannot run steps, or there is no live allocation"),
            "503": problem("The backend could not be reached"),
            ...commonProblems,
          },
        },
      },
      "/v1/workloads/{id}/events": {
        get: {
          operationId: "listEvents",
          summary: "The workload's transitions, oldest first",
          parameters: [idParameter],
          responses: {
            "200": {
              description: "Events",
              ...json({ type: "array", items: ref("Event") }),
            },
            "404": problem("No such workload"),
            ...commonProblems,
          },
        },
      },
      "/v1/diagnostics": {
        get: {
          operationId: "diagnostics",
          summary: "Backend health and reconciler figures",
          responses: {
            "200": { description: "Diagnostics", ...json(ref("Diagnostics")) },
            ...commonProblems,
          },
        },
      },
      "/metrics": {
        get: {
          operationId: "metrics",
          summary: "Prometheus text format",
          responses: {
            "200": {
              description: "Metrics",
              content: { "text/plain": { schema: { type: "string" } } },
            },
            ...commonProblems,
          },
        },
      },
      "/openapi.json": {
        get: {
          operationId: "openApi",
          summary: "This document",
          responses: {
            "200": { description: "OpenAPI 3.1", ...json({ type: "object" }) },
            ...commonProblems,
          },
        },
      },
    },
  } as const;
}
