/**
 * The Jupyter routes' shapes, for the OpenAPI contract (system/contract.ts) and the kernel
 * start's body. Query parameters are loose: Jupyter clients add their own (`session_id`),
 * and those clients are not ours to refuse.
 */
import * as v from "valibot";

const d = <S extends v.GenericSchema>(schema: S, text: string) =>
  v.pipe(schema, v.description(text));

export const JupyterQuery = v.looseObject({
  token: v.optional(d(v.string(), "The token, where a header cannot be set (/api/ only).")),
  session_id: v.optional(
    d(
      v.string(),
      "The client's session: its messages are kept while its websocket is gone, and replayed when it reconnects.",
    ),
  ),
});

export const KernelStartBody = v.strictObject({
  name: v.optional(d(v.string(), "A kernelspec: a profile's name; python3 means the default.")),
  env: v.optional(
    d(
      v.record(v.string(), v.unknown()),
      "The client's environment: only KERNEL_* variables the env policy allows are used.",
    ),
  ),
  path: v.optional(d(v.unknown(), "The notebook's path (not used: it chooses nothing).")),
});

export const KernelSchema = v.object({
  id: d(v.string(), "The kernel id: the session's workload id in a UUID-like spelling."),
  name: d(v.string(), "The kernelspec (profile) name."),
  last_activity: d(v.string(), "ISO 8601: the last message either way, or the session's."),
  execution_state: d(
    v.picklist(["starting", "idle", "busy", "restarting", "dead"]),
    "starting until READY, then busy/idle as the kernel says.",
  ),
  connections: d(v.number(), "Open channels websockets."),
});

export const KernelListSchema = v.array(KernelSchema);

export const KernelspecSchema = v.object({
  name: d(v.string(), "The profile's name."),
  spec: d(
    v.looseObject({
      display_name: d(v.string(), "Python (PROFILE)."),
      language: d(v.string(), "python."),
    }),
    "Jupyter's kernel.json; metadata.openai4s is the profile's public view.",
  ),
  resources: d(v.record(v.string(), v.unknown()), "None (no logos)."),
});

export const KernelspecListSchema = v.object({
  default: d(
    v.nullable(v.string()),
    "The default kernelspec: the profile named default, or the first.",
  ),
  kernelspecs: d(v.record(v.string(), KernelspecSchema), "By name."),
});

export const JupyterApiSchema = v.object({
  version: d(v.string(), "The Jupyter Server API version this follows."),
  openai4s: d(v.string(), "The daemon's version."),
});
