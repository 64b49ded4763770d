/**
 * Where the inspector listens: --inspect-addr HOST:PORT when given (failing
 * loudly if it cannot), else the first free port of 127.0.0.1:4040-4049
 * (and none at all, said in one line, when all ten are taken: the tunnels
 * matter more than their inspector).
 */
import { DEFAULT_PORTS } from "./limits.ts";

export interface ListenAddress {
  /** As Bun.serve takes it: an IPv6 literal without brackets. */
  host: string;
  port: number;
}

/** "127.0.0.1:4040", "localhost:4041", "[::1]:4040", "0.0.0.0:4040", or a bare port (on 127.0.0.1); undefined when not one. */
export function parseListenAddress(raw: string): ListenAddress | undefined {
  const m = /^(?:(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):)?([0-9]{1,5})$/.exec(raw.trim());
  if (!m) return undefined;
  const port = Number(m[2]);
  if (port > 65535) return undefined;
  const host = m[1] ? m[1].replace(/^\[|\]$/g, "") : DEFAULT_PORTS.host;
  return { host, port };
}

/** "127.0.0.1:4040", "[::1]:4040": the address as a person (and a URL) writes it. */
export const showAddress = (a: ListenAddress) => `${a.host.includes(":") ? `[${a.host}]` : a.host}:${a.port}`;

/** Loopback names and addresses: listening there keeps the inspector on this machine. */
export function isLoopback(host: string): boolean {
  const h = host.toLowerCase();
  return h === "localhost" || h === "::1" || /^127\.[0-9]+\.[0-9]+\.[0-9]+$/.test(h);
}

/** The port is taken (or the address is not this machine's): another can be tried. */
export function isAddressInUse(err: unknown): boolean {
  const e = err as { code?: string; message?: string };
  return e.code === "EADDRINUSE" || /in use|EADDRINUSE/i.test(e.message ?? "");
}

/**
 * Calls `listen` on each port in turn until one works; returns its result,
 * or undefined when every port is taken. Any other failure is thrown.
 */
export function listenOnFirstFree<T>(host: string, ports: Iterable<number>, listen: (a: ListenAddress) => T): T | undefined {
  for (const port of ports) {
    try {
      return listen({ host, port });
    } catch (err) {
      if (!isAddressInUse(err)) throw err;
    }
  }
  return undefined;
}

export function* portRange(first: number, last: number): Generator<number> {
  for (let p = first; p <= last; p++) yield p;
}
