/**
 * A client of the portal (the users' API on the server's domain itself), as
 * a script or a page on the portal would call it: through the edge on
 * 127.0.0.1 with Host localhost:<edgePort> (the tests' domain), JSON in,
 * status + JSON out, a cookie jar of one session.
 */
import type { ApiResponse } from "./admin.ts";

export class PortalClient {
  cookie: string | undefined;
  /** Fields sent with every request (Origin, Sec-Fetch-Site: what a browser would add). */
  extra: Record<string, string> = {};

  constructor(readonly edgePort: number) {}

  /** The portal's own origin, as a page on it has. */
  get origin(): string {
    return `http://localhost:${this.edgePort}`;
  }

  async call<T = any>(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<ApiResponse<T>> {
    const res = await fetch(`http://localhost:${this.edgePort}${path}`, {
      method,
      headers: {
        host: `localhost:${this.edgePort}`,
        ...(body === undefined ? {} : { "Content-Type": "application/json" }),
        ...(this.cookie ? { Cookie: this.cookie } : {}),
        ...this.extra,
        ...headers,
      },
      body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
      redirect: "manual",
    });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {}
    return { status: res.status, body: parsed as T, headers: res.headers };
  }

  async login(username: string, password = "password-123"): Promise<ApiResponse> {
    const res = await this.call("POST", "/_burrow/api/login", { username, password });
    const setCookie = res.headers.get("set-cookie");
    if (res.status === 200 && setCookie) this.cookie = setCookie.split(";")[0];
    return res;
  }

  get = <T = any>(path: string) => this.call<T>("GET", path);
  post = <T = any>(path: string, body?: unknown) => this.call<T>("POST", path, body ?? {});
  put = <T = any>(path: string, body?: unknown) => this.call<T>("PUT", path, body ?? {});
  delete = <T = any>(path: string) => this.call<T>("DELETE", path);
}

/** A portal client signed in as `username` (whose password is the harness's "password-123"). */
export async function portalAs(edgePort: number, username: string, password = "password-123"): Promise<PortalClient> {
  const client = new PortalClient(edgePort);
  const res = await client.login(username, password);
  if (res.status !== 200) throw new Error(`portal login as ${username}: ${res.status} ${JSON.stringify(res.body)}`);
  return client;
}
