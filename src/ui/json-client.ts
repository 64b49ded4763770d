/**
 * A page's JSON API client (the admin panel's, the portal's): the same
 * endpoints, cookie and errors a script uses. Every failure becomes an
 * ApiError whose message is a sentence a person can read (the server's own
 * {"error"} when it gave one); nothing is swallowed here. A 401 on any
 * request but the ones that sign in tells the page its session is gone.
 */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly retryAfter?: number,
  ) {
    super(message);
    this.name = "ApiError";
  }
}

export interface JsonClient {
  call<T>(method: string, path: string, body?: unknown): Promise<T>;
  /** Who is told when a request answers 401 (the session ended, elsewhere or by time). */
  whenSessionLost(handler: (message: string) => void): void;
}

/** `signsIn(path)`: a path whose 401 means wrong credentials, not a lost session. */
export function jsonClient(signsIn: (path: string) => boolean): JsonClient {
  let onSessionLost: (message: string) => void = () => {};
  return {
    whenSessionLost(handler) {
      onSessionLost = handler;
    },
    async call<T>(method: string, path: string, body?: unknown): Promise<T> {
      let res: Response;
      try {
        res = await fetch(path, {
          method,
          credentials: "same-origin",
          headers: body === undefined ? { Accept: "application/json" } : { Accept: "application/json", "Content-Type": "application/json" },
          body: body === undefined ? undefined : JSON.stringify(body),
        });
      } catch (err) {
        throw new ApiError(0, `Cannot reach the burrow server (${(err as Error).message}). Is it running?`);
      }
      const text = await res.text();
      let parsed: unknown;
      try {
        parsed = text === "" ? undefined : JSON.parse(text);
      } catch {
        parsed = undefined;
      }
      if (!res.ok) {
        const said = (parsed as { error?: unknown } | undefined)?.error;
        const message = typeof said === "string" && said !== "" ? said : `the server answered ${res.status} ${res.statusText}`.trim();
        const retry = Number(res.headers.get("retry-after"));
        const error = new ApiError(res.status, message, Number.isFinite(retry) && retry > 0 ? retry : undefined);
        if (res.status === 401 && !signsIn(path)) onSessionLost(message);
        throw error;
      }
      if (parsed === undefined) throw new ApiError(res.status, `the server answered ${res.status} without a JSON body`);
      return parsed as T;
    },
  };
}
