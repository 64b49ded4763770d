/**
 * A tunnel's settings as a person writes them, checked once for both places
 * they come from: the flags of `burrow http` / `burrow tcp` and the tunnels
 * of burrow.yml. Each check throws a UsageError whose message reads after
 * the flag or field's name.
 */
import type { LocalTarget } from "../agent/http.ts";
import { UsageError } from "./usage.ts";

/** "3000", "localhost:3000", "[::1]:3000", "http://host:3000" -> where the local service is. */
export function parseTarget(raw: string | undefined, allowScheme: boolean): LocalTarget {
  if (raw === undefined) throw new UsageError("missing the local port, e.g. 3000 or localhost:3000");
  let rest = raw;
  let tls = false;
  const scheme = /^([a-z]+):\/\//i.exec(raw);
  if (scheme) {
    if (!allowScheme || !["http", "https"].includes(scheme[1]!.toLowerCase())) throw new UsageError(`'${raw}' is not PORT or HOST:PORT`);
    tls = scheme[1]!.toLowerCase() === "https";
    rest = raw.slice(scheme[0].length).replace(/\/.*$/, "");
  }
  const m = /^(?:(\[[0-9a-f:.]+\]|[a-z0-9.-]+):)?([0-9]{1,5})$/i.exec(rest);
  const port = m ? Number(m[2]) : NaN;
  if (!m || port < 1 || port > 65535) throw new UsageError(`'${raw}' is not PORT or HOST:PORT (port 1-65535)`);
  const host = m[1] ? m[1].replace(/^\[|\]$/g, "") : "localhost";
  return { host, port, tls };
}

/** Seconds the edge should wait for the local service's answer: 0.1 to 86400. */
export function parseResponseTimeout(raw: string): number {
  const seconds = /^[0-9]{1,5}(\.[0-9]+)?$/.test(raw) ? Number(raw) : Number.NaN;
  if (!(seconds >= 0.1 && seconds <= 86_400)) throw new UsageError(`must be a number of seconds from 0.1 to 86400 (got '${raw}')`);
  return seconds;
}

/** The public TCP port asked for: 1 to 65535. */
export function parseRemotePort(raw: string): number {
  const port = Number(raw);
  if (!/^[0-9]{1,5}$/.test(raw) || port < 1 || port > 65535) throw new UsageError(`must be a port number from 1 to 65535 (got '${raw}')`);
  return port;
}

/** 'rewrite' or a host name; never empty. */
export function parseHostHeader(raw: string): string {
  if (raw.trim() === "") throw new UsageError("needs 'rewrite' or a host name");
  return raw;
}
