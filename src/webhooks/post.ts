/**
 * One signed POST to a webhook or an admission hook, within its limits: a
 * time for the whole exchange (--webhook-timeout), redirects never
 * followed (a 3xx is a failure: the admin gave this URL, not another), the
 * response read up to --webhook-max-response bytes and no further, and the
 * destination checked first (destination.ts). Never throws: the result
 * says how it ended, in words that carry no secret and not the URL's path
 * or query.
 */
import { VERSION } from "../version.ts";
import { resolveDestination } from "./destination.ts";

export interface PostLimits {
  timeoutMs: number;
  maxResponseBytes: number;
  allowPrivate: boolean;
}

export const DEFAULT_POST_LIMITS: PostLimits = { timeoutMs: 10_000, maxResponseBytes: 64 * 1024, allowPrivate: false };

export interface PostResult {
  /** A 2xx came back. */
  ok: boolean;
  status?: number;
  durationMs: number;
  /** Why it failed, in a few words. */
  error?: string;
  /** The response's body, when asked for and whole within the cap. */
  body?: string;
}

const USER_AGENT = `burrow-webhooks/${VERSION}`;

export async function postSigned(target: string, body: string, headers: Record<string, string>, limits: PostLimits, opts: { wantBody?: boolean } = {}): Promise<PostResult> {
  const started = performance.now();
  const took = () => Math.round(performance.now() - started);
  const url = URL.parse(target);
  if (!url) return { ok: false, durationMs: 0, error: "not a URL" };
  const signal = AbortSignal.timeout(limits.timeoutMs);
  try {
    const destination = await resolveDestination(url, limits.allowPrivate);
    if ("problem" in destination) return { ok: false, durationMs: took(), error: destination.problem };
    // plain http goes to the address just checked, with the name in Host (see destination.ts)
    let fetched = url.href;
    if (url.protocol === "http:") {
      const pinned = new URL(url.href);
      pinned.hostname = destination.address.includes(":") ? `[${destination.address}]` : destination.address;
      fetched = pinned.href;
    }
    const res = await fetch(fetched, {
      method: "POST",
      body,
      redirect: "manual",
      signal,
      headers: { ...headers, "content-type": "application/json", "user-agent": USER_AGENT, host: url.host },
      // a pooled connection is reused only to the same address, which was checked
      keepalive: true,
    });
    const read = await readCapped(res, limits.maxResponseBytes);
    const status = res.status;
    const durationMs = took();
    if (status >= 300 && status < 400) return { ok: false, status, durationMs, error: `redirect (${status}) not followed` };
    if (status < 200 || status >= 300) return { ok: false, status, durationMs, error: `answered ${status}` };
    if (opts.wantBody && read.tooLarge) return { ok: false, status, durationMs, error: `answer larger than ${limits.maxResponseBytes} bytes` };
    return { ok: true, status, durationMs, body: opts.wantBody ? read.text : undefined };
  } catch (err) {
    const durationMs = took();
    if (signal.aborted) return { ok: false, durationMs, error: `no answer within ${limits.timeoutMs / 1000} s` };
    return { ok: false, durationMs, error: describeFetchError(err) };
  }
}

/** The body up to `max` bytes; the rest is not read (the connection is dropped rather than drained). */
export async function readCapped(res: Response, max: number): Promise<{ text: string; tooLarge: boolean }> {
  if (!res.body) return { text: "", tooLarge: false };
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > max) {
      await reader.cancel().catch(() => {});
      return { text: "", tooLarge: true };
    }
    chunks.push(value);
  }
  return { text: Buffer.concat(chunks).toString("utf8"), tooLarge: false };
}

/** A fetch failure in a few words: its code (ECONNREFUSED, ...) rather than a message that may repeat the URL. */
export function describeFetchError(err: unknown): string {
  const code = (err as { code?: unknown }).code;
  // Bun says ECONNREFUSED (fetch) or ConnectionRefused (older releases): either is the receiver not listening
  if (typeof code === "string" && code !== "") return code === "ConnectionRefused" || code === "ECONNREFUSED" ? "connection refused" : code;
  return err instanceof Error ? err.name : "failed";
}
