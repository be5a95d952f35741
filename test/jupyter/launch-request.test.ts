/**
 * What a kernel launch takes from a Jupyter client, and the kernel ids Jupyter Server routes.
 */

import { describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { kernelIdOf, workloadIdOf } from "../../src/servers/http/jupyter/ids.ts";
import { kernelEnv } from "../../src/servers/http/jupyter/routes.ts";
import {
  binaryToJson,
  jsonFraming,
  jsonToV1,
  v1ToJson,
} from "../../src/servers/http/jupyter/v1-framing.ts";

const PYTHON = "/usr/bin/python3";
const hasJupyterServer =
  spawnSync(PYTHON, ["-c", "import jupyter_server.base.zmqhandlers"]).status === 0;

describe("kernelEnv", () => {
  test("only KERNEL_* names the env policy allows, with string values, reach the kernel", () => {
    const env = kernelEnv({
      KERNEL_USERNAME: "ada",
      KERNEL_WORKING_DIR: "/home/ada/nb",
      KERNEL_AUTH_TOKEN: "secret", // credential-shaped: never forwarded
      JUPYTER_GATEWAY_AUTH_TOKEN: "secret", // the client's own token
      PATH: "/opt/laptop/bin", // the client's machine, not the node
      LD_PRELOAD: "/tmp/x.so",
      KERNEL_LAUNCH_TIMEOUT: 40, // not a string
    });
    expect(env).toEqual({ KERNEL_USERNAME: "ada", KERNEL_WORKING_DIR: "/home/ada/nb" });
    expect(kernelEnv(null)).toEqual({});
    expect(kernelEnv("KERNEL_X=1")).toEqual({});
  });
});

describe("kernel ids", () => {
  test("a minted workload id is a five-group kernel id and back; others are themselves", () => {
    const kernel = kernelIdOf("w-abcde0123456789vwxyz");
    expect(kernel).toBe("w-abcde-01234-56789-vwxyz");
    expect(kernel).toMatch(/^\w+-\w+-\w+-\w+-\w+$/);
    expect(workloadIdOf(kernel)).toBe("w-abcde0123456789vwxyz");
    expect(kernelIdOf("custom-id")).toBe("custom-id");
    expect(workloadIdOf("custom-id")).toBe("custom-id");
    expect(workloadIdOf("../../etc")).toBe("../../etc"); // looked up as written: finds nothing
  });
});

describe("v1 websocket framing", () => {
  test("a message survives the round trip; a frame that is not one is null", () => {
    const text = JSON.stringify({
      channel: "shell",
      header: { msg_id: "m1", msg_type: "execute_request" },
      parent_header: {},
      metadata: {},
      content: { code: "print('é')" },
      buffers: [],
    });
    const back = JSON.parse(v1ToJson(jsonToV1(text)) ?? "null");
    expect(back).toEqual(JSON.parse(text));
    expect(v1ToJson(new Uint8Array([1, 2, 3]))).toBeNull();
    expect(v1ToJson(new Uint8Array(64).fill(255))).toBeNull();
  });

  test("a comm message's binary buffers ride the v1 frame, or the JSON framing's binary message", () => {
    const bytes = (...b: number[]) => Buffer.from(b).toString("base64");
    const text = JSON.stringify({
      channel: "iopub",
      header: { msg_id: "m2", msg_type: "comm_msg" },
      parent_header: {},
      metadata: {},
      content: { comm_id: "c", data: {} },
      buffers: [bytes(1, 2, 3), bytes(), bytes(255)],
    });
    expect(JSON.parse(v1ToJson(jsonToV1(text)) ?? "null")).toEqual(JSON.parse(text));
    // The JSON framing: a binary message then, which reads back as the same message.
    const binary = jsonFraming(text);
    if (typeof binary === "string") throw new Error("buffers were not framed");
    expect(JSON.parse(binaryToJson(binary) ?? "null")).toEqual(JSON.parse(text));
    const plain = JSON.stringify({ channel: "iopub", content: {}, buffers: [] });
    expect(jsonFraming(plain)).toBe(plain);
    // A client's JSON text sent in a binary frame is no binary message.
    expect(binaryToJson(new TextEncoder().encode(plain))).toBeNull();
  });

  test.skipIf(!hasJupyterServer)(
    "the JSON framing's binary message is Jupyter Server's (serialize_binary_message): each reads as the other",
    () => {
      const message = {
        channel: "iopub",
        header: { msg_id: "m3" },
        content: { data: {} },
        buffers: [Buffer.from([1, 2, 3]).toString("base64"), Buffer.from("xy").toString("base64")],
      };
      const ours = jsonFraming(JSON.stringify(message));
      const python = [
        "import base64, json, sys",
        "from jupyter_server.base.zmqhandlers import serialize_binary_message",
        "m = json.loads(sys.argv[1])",
        "m['buffers'] = [base64.b64decode(b) for b in m['buffers']]",
        "sys.stdout.write(base64.b64encode(serialize_binary_message(m)).decode())",
      ].join("\n");
      // Python's json.dumps spaces its separators; ours does not: compare after re-reading.
      const theirs = spawnSync(PYTHON, ["-c", python, JSON.stringify(message)], {
        encoding: "utf8",
      });
      const bytes = new Uint8Array(Buffer.from(theirs.stdout, "base64"));
      expect(JSON.parse(binaryToJson(bytes) ?? "null")).toEqual(message);
      if (typeof ours === "string") throw new Error("buffers were not framed");
      expect(JSON.parse(binaryToJson(ours) ?? "null")).toEqual(message);
      expect(Array.from(ours.subarray(0, 4))).toEqual(Array.from(bytes.subarray(0, 4)));
    },
  );
});
