/**
 * `HOST:PORT` as the gateway listens on it and workers dial it: parsed strictly (a hostname,
 * an IPv4 or a bracketed IPv6 address, and a port), and written back the same way.
 */
export interface HostPort {
  readonly hostname: string;
  readonly port: number;
}

const HOSTNAME_PATTERN = /^[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$/;
const IPV6_PATTERN = /^[0-9A-Fa-f:.]{2,45}$/;

/** Parses `HOST:PORT` or `[IPV6]:PORT`. Port 0 is accepted (ask the kernel for one). */
export function parseHostPort(text: string): HostPort | null {
  const bracketed = /^\[([^\]]+)\]:(\d{1,5})$/.exec(text);
  const plain = /^([^:[\]]+):(\d{1,5})$/.exec(text);
  const match = bracketed ?? plain;
  if (!match) return null;
  const hostname = match[1]!;
  const port = Number(match[2]);
  if (port > 65535) return null;
  if (bracketed ? !IPV6_PATTERN.test(hostname) : !HOSTNAME_PATTERN.test(hostname)) return null;
  return { hostname, port };
}

export function formatHostPort(address: HostPort): string {
  return address.hostname.includes(":")
    ? `[${address.hostname}]:${address.port}`
    : `${address.hostname}:${address.port}`;
}
