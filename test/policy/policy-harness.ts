/** Building blocks of the policy tests: a policy from YAML (its errors thrown as text), and the facts of a request. */
import { formatPolicyError, loadPolicy, type LoadOptions, type Policy, type PolicyError, type PolicyInput } from "../../src/policy/index.ts";

export function policyOf(yaml: string, options: LoadOptions = {}): Policy {
  const p = loadPolicy(yaml, options);
  if (Array.isArray(p)) throw new Error(p.map((e) => formatPolicyError(e)).join("\n"));
  return p;
}

export function errorsOf(yaml: string, options: LoadOptions = {}): PolicyError[] {
  const p = loadPolicy(yaml, options);
  if (!Array.isArray(p)) throw new Error("the policy loaded; errors were expected");
  return p;
}

export interface RequestSketch {
  method?: string;
  target?: string;
  headers?: [string, string][];
  clientIp?: string;
  host?: string;
  body?: string | Uint8Array;
  scheme?: "http" | "https";
  now?: number;
  response?: { status: number; headers?: [string, string][] };
}

/** The facts of one request, as the edge would give them. */
export function requestInput(r: RequestSketch = {}): PolicyInput {
  const host = r.host ?? "app.tunnels.example.com";
  const now = r.now ?? Date.now();
  return {
    conn: { clientIp: r.clientIp ?? "203.0.113.10", clientPort: 50000, serverPort: 443, openedAt: now },
    endpoint: { host, port: 443, protocol: r.scheme ?? "https", url: `${r.scheme ?? "https"}://${host}` },
    tunnel: { name: host.split(".")[0]!, kind: "http", user: "alice" },
    request: {
      method: r.method ?? "GET",
      target: r.target ?? "/",
      scheme: r.scheme ?? "https",
      host,
      headers: [["Host", host], ...(r.headers ?? [])],
      body: typeof r.body === "string" ? new TextEncoder().encode(r.body) : r.body,
      receivedAt: now,
    },
    response: r.response ? { status: r.response.status, headers: r.response.headers ?? [] } : undefined,
    now,
  };
}

/** The response a run answered with (status, headers by lower-case name, body as text), or undefined when it went on. */
export function answered(out: { verdict: { kind: string; response?: { status: number; headers: [string, string][]; body: string | Uint8Array } } }) {
  if (out.verdict.kind !== "respond" || !out.verdict.response) return undefined;
  const r = out.verdict.response;
  return { status: r.status, headers: Object.fromEntries(r.headers.map(([n, v]) => [n.toLowerCase(), v])), body: typeof r.body === "string" ? r.body : Buffer.from(r.body).toString("utf8") };
}
