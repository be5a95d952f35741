/**
 * `--listen` addresses: `unix:PATH` or `HOST:PORT` (`[V6]:PORT` for IPv6). A TCP address
 * that is not loopback needs `--allow-remote`: the admin API runs anyone's commands, and
 * exposing it to a network should be a decision someone typed, not a default.
 */
import { isIP } from "node:net";
import { resolve } from "node:path";

export type ListenAddress =
  | { readonly kind: "unix"; readonly path: string }
  | { readonly kind: "tcp"; readonly host: string; readonly port: number };

export type ParsedListen =
  | { readonly kind: "Ok"; readonly address: ListenAddress }
  | { readonly kind: "Invalid"; readonly message: string };

export function parseListenAddress(raw: string, cwd: string): ParsedListen {
  if (raw.startsWith("unix:")) {
    const path = raw.slice("unix:".length);
    if (path === "") return { kind: "Invalid", message: "unix: needs a path" };
    return { kind: "Ok", address: { kind: "unix", path: resolve(cwd, path) } };
  }
  const match = /^(?:\[([0-9A-Fa-f:.]+)\]|([^:[\]]+)):([0-9]{1,5})$/.exec(raw);
  if (!match) {
    return { kind: "Invalid", message: `"${raw}" is neither unix:PATH nor HOST:PORT` };
  }
  const host = (match[1] ?? match[2]) as string;
  const port = Number(match[3]);
  if (port < 1 || port > 65535) return { kind: "Invalid", message: `port ${port} out of range` };
  if (match[1] !== undefined && isIP(host) !== 6) {
    return { kind: "Invalid", message: `"${host}" is not an IPv6 address` };
  }
  if (match[2] !== undefined && isIP(host) === 0 && !/^[A-Za-z0-9.-]{1,253}$/.test(host)) {
    return { kind: "Invalid", message: `"${host}" is not a host name` };
  }
  return { kind: "Ok", address: { kind: "tcp", host, port } };
}

/** Loopback by address, or the name `localhost`; any other name may resolve anywhere. */
export function isLoopback(host: string): boolean {
  if (host === "localhost") return true;
  if (isIP(host) === 4) return host.startsWith("127.");
  if (isIP(host) === 6) return host === "::1" || /^(0:){7}1$/.test(host);
  return false;
}

export function formatListenAddress(address: ListenAddress): string {
  if (address.kind === "unix") return `unix:${address.path}`;
  return address.host.includes(":")
    ? `[${address.host}]:${address.port}`
    : `${address.host}:${address.port}`;
}

/** The admin's certificate (chain) and private key files for the TCP listeners. */
export interface ListenTlsPaths {
  readonly certPath: string;
  readonly keyPath: string;
}
