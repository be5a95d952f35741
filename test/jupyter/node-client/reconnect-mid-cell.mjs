// JupyterLab's client library under Node (not Bun), as a Node front end or a browser runs
// it: `ws` as the WebSocket, fetch's default body type (text/plain) for the kernel start.
// Starts a kernel, runs a cell that prints for a few seconds, forces `kernel.reconnect()`
// after its first line, and prints what the client got as one JSON line on stdout.
// Usage: node reconnect-mid-cell.mjs BASE_URL TOKEN
import { KernelManager, ServerConnection } from "@jupyterlab/services";
import WebSocket from "ws";

const [baseUrl, token] = process.argv.slice(2);
const settings = ServerConnection.makeSettings({
  baseUrl: `${baseUrl}/`,
  wsUrl: `${baseUrl.replace(/^http/, "ws")}/`,
  token,
  appendToken: true,
  WebSocket,
});
const kernels = new KernelManager({ serverSettings: settings });
const result = { started: false, stdout: "", reply: null, reconnected: false, statuses: [] };
try {
  const kernel = await kernels.startNew({ name: "python3" });
  result.started = true;
  await kernel.info;
  const code =
    "import time\nfor i in range(8):\n    print('line', i, flush=True)\n    time.sleep(0.4)";
  const future = kernel.requestExecute({ code });
  let first;
  const firstLine = new Promise((resolve) => {
    first = resolve;
  });
  future.onIOPub = (msg) => {
    if (msg.header.msg_type === "stream") {
      result.stdout += msg.content.text;
      first();
    }
    if (msg.header.msg_type === "status") result.statuses.push(msg.content.execution_state);
  };
  await firstLine;
  await kernel.reconnect();
  result.reconnected = true;
  const timeout = new Promise((resolve) => setTimeout(() => resolve(null), 20_000));
  const reply = await Promise.race([future.done, timeout]);
  result.reply = reply === null ? null : reply.content.status;
  await kernel.shutdown();
} catch (error) {
  result.error = String(error?.stack ?? error);
}
kernels.dispose();
process.stdout.write(`${JSON.stringify(result)}\n`);
process.exit(0);
