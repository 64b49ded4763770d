/** A small admin API client for tests: JSON in, status + JSON out, a cookie jar of one. */
import { ADMIN_PASSWORD, type TestServer } from "./server.ts";

export interface ApiResponse<T = any> {
  status: number;
  body: T;
  headers: Headers;
}

export class AdminClient {
  cookie: string | undefined;

  constructor(readonly baseUrl: string) {}

  async call<T = any>(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<ApiResponse<T>> {
    const res = await fetch(this.baseUrl + path, {
      method,
      headers: {
        ...(body === undefined ? {} : { "Content-Type": "application/json" }),
        ...(this.cookie ? { Cookie: this.cookie } : {}),
        ...headers,
      },
      body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
    });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {}
    return { status: res.status, body: parsed as T, headers: res.headers };
  }

  async login(username = "admin", password = ADMIN_PASSWORD): Promise<ApiResponse> {
    const res = await this.call("POST", "/api/auth/login", { username, password });
    const setCookie = res.headers.get("set-cookie");
    if (res.status === 200 && setCookie) this.cookie = setCookie.split(";")[0];
    return res;
  }

  get = <T = any>(path: string) => this.call<T>("GET", path);
  post = <T = any>(path: string, body?: unknown) => this.call<T>("POST", path, body ?? {});
  put = <T = any>(path: string, body?: unknown) => this.call<T>("PUT", path, body ?? {});
  delete = <T = any>(path: string) => this.call<T>("DELETE", path);

  /** Creates a user and returns its id. */
  async createUser(username: string, extra: Record<string, unknown> = {}): Promise<number> {
    const res = await this.post("/api/users", { username, password: "password-123", ...extra });
    if (res.status !== 201) throw new Error(`create user ${username}: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body.id;
  }

  /** Generates a token for a user's device and returns its secret. */
  async createToken(userId: number, deviceName = "laptop"): Promise<string> {
    const res = await this.post(`/api/users/${userId}/tokens`, { device_name: deviceName });
    if (res.status !== 201) throw new Error(`token for user ${userId}: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body.token;
  }
}

/** A client signed in as the server's first admin. */
export async function signedIn(server: TestServer): Promise<AdminClient> {
  const client = new AdminClient(server.adminUrl);
  const res = await client.login();
  if (res.status !== 200) throw new Error(`admin login failed: ${res.status} ${JSON.stringify(res.body)}`);
  return client;
}
