/**
 * The requests traffic policies' http-request action makes, sent by the
 * edge within the server's bounds. A tunnel's policy is its user's text,
 * so each request is an SSRF surface: its host's every address is checked
 * at each hop (redirects too) as a webhook's is (webhooks/destination.ts):
 * loopback, private, link-local (169.254.169.254, a cloud's metadata),
 * shared and reserved addresses, and this machine's own (its admin API,
 * its public port), are refused unless --policy-http-request-allow-private
 * is on; plain http goes to the address that was checked (no DNS
 * rebinding), https by name with a certificate valid for it. An operator's
 * layers are held to the same rules: the flag is the operator's one
 * switch, and a layer's text reaches the edge by the same path as a
 * tunnel's. Bounded: one deadline for the whole exchange, the answer read
 * up to a cap, at most so many out at once over every tunnel and fewer
 * for any one tunnel (past either a request fails at once rather than
 * waits: one tunnel's policy cannot take every place and leave the others
 * none), and so many a run (the action counts them), so a visitor's
 * request is not made into a flood at another's service. Never throws;
 * what it says carries the host, never the path, query or headers.
 */
import { networkInterfaces } from "node:os";
import ipaddr from "ipaddr.js";
import { HTTP_REQUEST_ERRORS, type HttpRequestErrorCode, type OutgoingRequest, type OutgoingResult, type PolicyHttpClient } from "../../policy/index.ts";
import { resolveDestination } from "../../webhooks/destination.ts";
import { describeFetchError, readCapped } from "../../webhooks/post.ts";

export interface OutgoingLimits {
  /** The longest a request may take, whatever its action says (--policy-http-request-timeout). */
  timeoutMs: number;
  /** The largest answer body read (--policy-http-request-max-bytes): ngrok's 256 KiB. */
  maxBytes: number;
  /** Requests out at once, over every tunnel (--policy-http-request-concurrency). */
  concurrency: number;
  /** Requests out at once for one tunnel, its operator's layers' with its own (--policy-http-request-concurrency-per-tunnel); never more than `concurrency`. */
  concurrencyPerTunnel: number;
  /** Loopback, private and link-local addresses allowed (--policy-http-request-allow-private). */
  allowPrivate: boolean;
  /** Requests one run of a phase of a policy may make (--policy-http-request-max-per-run). */
  maxPerRun: number;
}

export const DEFAULT_OUTGOING_LIMITS: OutgoingLimits = { timeoutMs: 10_000, maxBytes: 256 * 1024, concurrency: 64, concurrencyPerTunnel: 16, allowPrivate: false, maxPerRun: 8 };

const FLAG = "--policy-http-request-allow-private";
/** Headers a redirect to another origin does not carry on (as Go's client, ngrok's, does). */
const CREDENTIALS = new Set(["authorization", "cookie", "proxy-authorization"]);

type Failure = Extract<OutgoingResult, { ok: false }>;

export class OutgoingRequests implements PolicyHttpClient {
  private readonly limits: OutgoingLimits;
  private active = 0;
  /** Requests out now by tunnel; a tunnel with none out has no entry (at most `concurrency` entries). */
  private readonly activeByTunnel = new Map<string, number>();

  constructor(limits: Partial<OutgoingLimits> = {}) {
    this.limits = { ...DEFAULT_OUTGOING_LIMITS, ...limits };
  }

  get maxTimeoutMs(): number {
    return this.limits.timeoutMs;
  }

  get maxPerRun(): number {
    return this.limits.maxPerRun;
  }

  /** Requests out now. */
  get inFlight(): number {
    return this.active;
  }

  /** Tunnels with requests out now. */
  get tunnelsInFlight(): number {
    return this.activeByTunnel.size;
  }

  async send(request: OutgoingRequest): Promise<OutgoingResult> {
    const started = performance.now();
    const took = () => Math.round(performance.now() - started);
    if (this.active >= this.limits.concurrency) return fail(HTTP_REQUEST_ERRORS.BUSY, `the server has ${this.limits.concurrency} policy requests out already (--policy-http-request-concurrency)`, 0);
    const perTunnel = Math.min(this.limits.concurrencyPerTunnel, this.limits.concurrency);
    const ours = this.activeByTunnel.get(request.tunnel) ?? 0;
    if (ours >= perTunnel) return fail(HTTP_REQUEST_ERRORS.BUSY, `this tunnel has ${perTunnel} policy requests out already (--policy-http-request-concurrency-per-tunnel)`, 0);
    const timeoutMs = Math.min(request.timeoutMs, this.limits.timeoutMs);
    const signal = AbortSignal.timeout(timeoutMs);
    const timedOut = new Promise<Failure>((resolve) => signal.addEventListener("abort", () => resolve(fail(HTTP_REQUEST_ERRORS.TIMEOUT, `no answer within ${timeoutMs} ms`, took())), { once: true }));
    this.active++;
    this.activeByTunnel.set(request.tunnel, ours + 1);
    try {
      // a name's lookup cannot be cut short: the deadline answers for it
      return await Promise.race([this.follow(request, signal, took, timeoutMs), timedOut]);
    } finally {
      this.active--;
      const left = this.activeByTunnel.get(request.tunnel)! - 1;
      if (left > 0) this.activeByTunnel.set(request.tunnel, left);
      else this.activeByTunnel.delete(request.tunnel);
    }
  }

  /** The request and the redirects it may follow, each hop's host checked. */
  private async follow(request: OutgoingRequest, signal: AbortSignal, took: () => number, timeoutMs: number): Promise<OutgoingResult> {
    let url = new URL(request.url);
    let method = request.method;
    let body = request.body;
    let headers = request.headers;
    for (let hop = 0; ; hop++) {
      if (url.protocol !== "http:" && url.protocol !== "https:") return fail(HTTP_REQUEST_ERRORS.BAD_URL, `a redirect to a ${url.protocol} URL`, took());
      const destination = await this.destination(url);
      if ("code" in destination) return { ...destination, timeMs: took() };
      const address = destination.address;
      let res: Response;
      try {
        res = await fetch(pinned(url, address), { method, body, headers: [...headers, ["host", url.host]], redirect: "manual", signal });
      } catch (err) {
        if (signal.aborted) return fail(HTTP_REQUEST_ERRORS.TIMEOUT, `no answer within ${timeoutMs} ms`, took(), address);
        return fail(HTTP_REQUEST_ERRORS.FAILED, `${url.host}: ${describeFetchError(err)}`, took(), address);
      }
      const location = res.headers.get("location");
      if (res.status >= 300 && res.status < 400 && location !== null && request.maxRedirects > 0) {
        await res.body?.cancel().catch(() => {});
        if (hop >= request.maxRedirects) return fail(HTTP_REQUEST_ERRORS.TOO_MANY_REDIRECTS, `more than ${request.maxRedirects} redirects`, took(), address);
        const next = URL.parse(location, url.href);
        if (!next) return fail(HTTP_REQUEST_ERRORS.BAD_URL, "a redirect to something that is not a URL", took(), address);
        // 303, and 301/302 after a POST, are followed with a GET, as browsers and Go do
        if (res.status === 303 || ((res.status === 301 || res.status === 302) && method === "POST")) {
          method = "GET";
          body = undefined;
          headers = headers.filter(([n]) => n !== "content-type");
        }
        if (next.origin !== url.origin) headers = headers.filter(([n]) => !CREDENTIALS.has(n));
        url = next;
        continue;
      }
      try {
        const read = await readCapped(res, this.limits.maxBytes);
        if (read.tooLarge) return fail(HTTP_REQUEST_ERRORS.TOO_LARGE, `response size exceeded: the answer is larger than ${this.limits.maxBytes} bytes`, took(), address);
        const answerHeaders: [string, string][] = [];
        res.headers.forEach((value, name) => answerHeaders.push([name, value]));
        return { ok: true, answer: { resolvedIp: address, status: res.status, headers: answerHeaders, body: read.text, timeMs: took() } };
      } catch (err) {
        if (signal.aborted) return fail(HTTP_REQUEST_ERRORS.TIMEOUT, `no answer within ${timeoutMs} ms`, took(), address);
        return fail(HTTP_REQUEST_ERRORS.FAILED, `${url.host}: ${describeFetchError(err)}`, took(), address);
      }
    }
  }

  /** The address to send to, or why not: the host's every address public, none of them this machine's. */
  protected async destination(url: URL): Promise<{ address: string } | { ok: false; code: HttpRequestErrorCode; message: string }> {
    const allow = this.limits.allowPrivate;
    const found = await resolveDestination(url, allow, FLAG);
    if ("problem" in found) return { ok: false, code: found.refused ? HTTP_REQUEST_ERRORS.ADDRESS_REFUSED : HTTP_REQUEST_ERRORS.NOT_RESOLVED, message: found.problem };
    if (!allow) {
      const own = found.addresses.find(isOwnAddress);
      if (own !== undefined) return { ok: false, code: HTTP_REQUEST_ERRORS.ADDRESS_REFUSED, message: `${url.hostname} is ${own}, an address of this server: refused (${FLAG} allows it)` };
    }
    return { address: found.address };
  }
}

function fail(code: HttpRequestErrorCode, message: string, timeMs: number, resolvedIp?: string): Failure {
  return resolvedIp === undefined ? { ok: false, code, message, timeMs } : { ok: false, code, message, timeMs, resolvedIp };
}

/** Plain http to the address that was checked (the name in Host); https by name, whose certificate must then be valid for it. */
function pinned(url: URL, address: string): string {
  if (url.protocol !== "http:") return url.href;
  const to = new URL(url.href);
  to.hostname = address.includes(":") ? `[${address}]` : address;
  return to.href;
}

/** Whether an address is one of this machine's interfaces' (its public address among them: the edge, the admin API). */
function isOwnAddress(address: string): boolean {
  const wanted = normal(address);
  for (const list of Object.values(networkInterfaces())) for (const a of list ?? []) if (normal(a.address) === wanted) return true;
  return false;
}

function normal(address: string): string {
  const bare = address.split("%")[0]!;
  if (!ipaddr.isValid(bare)) return bare;
  const parsed = ipaddr.parse(bare);
  if (parsed.kind() === "ipv6" && (parsed as ipaddr.IPv6).isIPv4MappedAddress()) return (parsed as ipaddr.IPv6).toIPv4Address().toString();
  return parsed.toNormalizedString();
}
