/**
 * A client of the portal (the users' API on the server's domain itself), as
 * a script would call it: http://localhost:<edgePort> (the tests' domain is
 * localhost), JSON in, status + JSON out, a cookie jar of one session. The
 * admin API's test client, with the portal's sign-in.
 */
import { AdminClient, type ApiResponse } from "./admin.ts";

export class PortalClient extends AdminClient {
  constructor(readonly edgePort: number) {
    super(`http://localhost:${edgePort}`);
  }

  /** The portal's own origin, as a page on it has. */
  get origin(): string {
    return this.baseUrl;
  }

  override async login(username: string, password = "password-123"): Promise<ApiResponse> {
    const res = await this.call("POST", "/_burrow/api/login", { username, password });
    const setCookie = res.headers.get("set-cookie");
    if (res.status === 200 && setCookie) this.cookie = setCookie.split(";")[0];
    return res;
  }
}

/** A portal client signed in as `username` (whose password is the harness's "password-123"). */
export async function portalAs(edgePort: number, username: string, password = "password-123"): Promise<PortalClient> {
  const client = new PortalClient(edgePort);
  const res = await client.login(username, password);
  if (res.status !== 200) throw new Error(`portal login as ${username}: ${res.status} ${JSON.stringify(res.body)}`);
  return client;
}
