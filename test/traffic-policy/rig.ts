/**
 * A tunnel with a traffic policy, for the wiring's tests: the real server,
 * the real agent run with `--policy-file`, and an upstream that echoes what
 * it was sent (method, path, headers) as JSON, so a test sees what the
 * policy made of the request.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { withTunnel, type Tunnel, type TunnelOptions } from "../harness/tunnel.ts";
import { curl, type CurlReply } from "./curl.ts";

/** What the echo upstream answers: the request as the service got it. */
export interface Echoed {
  method: string;
  path: string;
  headers: Record<string, string>;
  body: string;
}

export async function echo(req: Request): Promise<Response> {
  const url = new URL(req.url);
  const headers: Record<string, string> = {};
  req.headers.forEach((v, k) => (headers[k] = v));
  const body: Echoed = { method: req.method, path: url.pathname + url.search, headers, body: await req.text() };
  return Response.json(body, { headers: { "x-from-service": "yes" } });
}

/** A file holding `text`, removed when the returned handle is disposed. */
export function policyFile(text: string): { path: string } & Disposable {
  const dir = mkdtempSync(join(tmpdir(), "burrow-policy-"));
  const path = join(dir, "policy.yml");
  writeFileSync(path, text);
  return { path, [Symbol.dispose]: () => rmSync(dir, { recursive: true, force: true }) };
}

export interface PolicyTunnel extends Tunnel {
  /** curl to the tunnel: `path` on its public name. */
  curl(path: string, args?: string[]): Promise<CurlReply>;
  url(path: string): string;
}

/** A tunnel to `upstream` (the echo by default) whose agent runs with the policy `text`. */
export async function withPolicy(text: string, opts: Partial<TunnelOptions> = {}): Promise<PolicyTunnel> {
  const file = policyFile(text);
  try {
    const t = await withTunnel({ upstream: echo, ...opts, args: ["--policy-file", file.path, ...(opts.args ?? [])] });
    const url = (path: string) => `http://${t.agent.subdomain}.localhost:${t.server.edgePort}${path}`;
    const close = async () => {
      await t.close();
      file[Symbol.dispose]();
    };
    return { ...t, url, curl: (path, args) => curl(url(path), args), close, [Symbol.asyncDispose]: close };
  } catch (err) {
    file[Symbol.dispose]();
    throw err;
  }
}
