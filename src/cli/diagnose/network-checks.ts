/**
 * The first checks, on the way to the server: its name, a TCP connection
 * to its port, TLS, and the proxy in between when there is one.
 */
import { lookup } from "node:dns/promises";
import { isIP, type Socket } from "node:net";
import { hidePassword } from "../../log-redact.ts";
import type { CheckResult } from "./checks.ts";
import { openTcp, openThroughProxy, openTls, ReachError, within, type Server, type TlsFacts } from "./reach.ts";

/** A certificate that ends sooner than this is a warning: time to renew it. */
export const EXPIRY_WARNING_DAYS = 14;
const DAY_MS = 86_400_000;

const isLoopback = (host: string) => host === "localhost" || host.endsWith(".localhost") || /^127\./.test(host) || host === "::1";

export async function checkDns(s: Server, timeoutMs: number, proxied: boolean): Promise<CheckResult> {
  if (isIP(s.host)) return { id: "dns", status: "pass", detail: `${s.host} is an address: no name to resolve` };
  const started = performance.now();
  try {
    const found = await within(lookup(s.host, { all: true }), timeoutMs, `answer for ${s.host}`);
    const addresses = [...new Set(found.map((a) => a.address))];
    return { id: "dns", status: "pass", detail: `${s.host} resolves to ${addresses.join(", ")}`, ms: ms(started) };
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? "ERROR";
    const why = code === "ENOTFOUND" ? "no such name" : code === "TIMEOUT" ? (err as Error).message : `${code}: ${(err as Error).message}`;
    // through a proxy, the proxy resolves the name: this machine need not
    if (proxied) return { id: "dns", status: "warn", code, detail: `${s.host} does not resolve here (${why})`, advice: "The proxy resolves it for the agent; this matters only without the proxy.", ms: ms(started) };
    return {
      id: "dns",
      status: "fail",
      code,
      detail: `${s.host} does not resolve (${why})`,
      advice: "Check the spelling of --server (or the config file's server:), the DNS records of the server's domain (burrow server dns-check on the server), and this machine's resolver.",
      ms: ms(started),
    };
  }
}

/** TCP straight to the server; the open socket for TLS, or the failed check. */
export async function checkTcp(s: Server, timeoutMs: number): Promise<{ result: CheckResult; socket?: Socket }> {
  const started = performance.now();
  try {
    const socket = await openTcp(s.host, s.port, timeoutMs);
    return { result: { id: "tcp", status: "pass", detail: `connected to ${socket.remoteAddress}:${s.port}`, ms: ms(started) }, socket };
  } catch (err) {
    const code = (err as ReachError).code;
    const where = `${s.host}:${s.port}`;
    const [detail, advice] =
      code === "ECONNREFUSED"
        ? [`nothing listens on ${where}: connection refused`, `Check the port of the server URL (${s.url.origin}: the server's public port, --http-port or 443 with TLS), and that the server runs.`]
        : code === "TIMEOUT"
          ? [`no answer from ${where} within ${timeoutMs / 1000} s`, "A firewall drops the packets on the way (this network's, or the server's), or the address is wrong."]
          : [`cannot connect to ${where}: ${(err as Error).message}`, "Check this machine's network and route to the server."];
    return { result: { id: "tcp", status: "fail", code, detail, advice, ms: ms(started) } };
  }
}

/** The server's certificate, judged as the agent judges it (a chain it trusts, for the name, in date). */
export async function checkTls(s: Server, socket: Socket, timeoutMs: number, insecure: boolean, now = Date.now()): Promise<{ result: CheckResult; tls?: TlsFacts }> {
  const started = performance.now();
  let facts: TlsFacts;
  try {
    facts = await openTls(socket, s.host, timeoutMs);
  } catch (err) {
    socket.destroy();
    return {
      result: {
        id: "tls",
        status: "fail",
        code: (err as ReachError).code,
        detail: (err as Error).message,
        advice: "Is the port a TLS one? An http:// server takes --server http://...; behind a proxy that ends TLS, its certificate is the one the agent sees.",
        ms: ms(started),
      },
    };
  }
  const { cert } = facts;
  const names = cert.subjectaltname ? cert.subjectaltname.replace(/DNS:|IP Address:/g, "") : cert.subject?.CN ?? "(no name)";
  const until = cert.valid_to ? new Date(cert.valid_to) : undefined;
  const from = cert.valid_from ? new Date(cert.valid_from) : undefined;
  const days = until ? Math.floor((until.getTime() - now) / DAY_MS) : undefined;
  const validity = until ? `valid until ${until.toISOString().slice(0, 10)}${days !== undefined && days >= 0 ? ` (${days} days)` : ""}` : "no end date";
  const issuer = cert.issuer?.O ?? cert.issuer?.CN;
  const about = `certificate for ${names}${issuer ? `, issued by ${issuer}` : ""}, ${validity}`;
  const result = (status: CheckResult["status"], detail: string, advice?: string, code?: string): { result: CheckResult; tls: TlsFacts } => ({
    result: { id: "tls", status, detail, ...(advice ? { advice } : {}), ...(code ? { code } : {}), ms: ms(started) },
    tls: facts,
  });
  const problem = facts.authorizationError;
  const expired = problem === "CERT_HAS_EXPIRED" || (until !== undefined && until.getTime() < now);
  const notYet = problem === "CERT_NOT_YET_VALID" || (from !== undefined && from.getTime() > now);
  // --insecure: the agent connects whatever the certificate; said, not failed
  const severity = insecure ? "warn" : "fail";
  const insecureNote = insecure ? " The agent runs with --insecure, so it connects anyway, and anyone in between can read its traffic." : "";
  if (expired) {
    return result(severity, `the certificate expired on ${until?.toISOString().slice(0, 10) ?? "(unknown)"}: ${about}`, `Renew it on the server (with --acme-email the server renews its own; otherwise replace --tls-cert and restart it).${insecureNote}`, "CERT_HAS_EXPIRED");
  }
  if (notYet) {
    return result(severity, `the certificate is not valid before ${from?.toISOString()}: ${about}`, `This machine's clock, or the server's certificate, is wrong (the clock check below says which).${insecureNote}`, "CERT_NOT_YET_VALID");
  }
  if (facts.nameError) return result(severity, `the certificate is not for ${s.host}: ${about}`, `Use the server's name in --server, as its certificate has it.${insecureNote}`, "ERR_TLS_CERT_ALTNAME_INVALID");
  if (problem) {
    return result(
      severity,
      `the certificate does not verify (${problem}): ${about}`,
      `A self-signed or private CA: trust it with NODE_EXTRA_CA_CERTS=/path/to/ca.pem; behind a TLS-inspecting proxy, trust the proxy's CA.${insecureNote}`,
      problem,
    );
  }
  if (days !== undefined && days < EXPIRY_WARNING_DAYS) return result("warn", about, `It expires in ${days} days: renew it on the server.`, "CERT_EXPIRES_SOON");
  return result("pass", about);
}

/** Through the proxy to the server: an HTTP proxy's CONNECT or SOCKS5's handshake. */
export async function checkProxy(s: Server, proxy: { url: string; from: string }, timeoutMs: number): Promise<{ result: CheckResult; socket?: Socket }> {
  const started = performance.now();
  const shown = `${hidePassword(proxy.url)} (${proxy.from})`;
  try {
    const socket = await openThroughProxy(new URL(proxy.url), s.host, s.port, timeoutMs);
    return { result: { id: "proxy", status: "pass", detail: `${shown} connects to ${s.host}:${s.port}`, ms: ms(started) }, socket };
  } catch (err) {
    const code = (err as ReachError).code;
    const advice =
      code === "PROXY_REFUSED"
        ? `The proxy does not let this machine reach ${s.host}:${s.port}: ask its admins to allow it (an HTTP proxy must allow CONNECT to that port), or run without it (no --proxy, no proxy: in the config file, HTTPS_PROXY and ALL_PROXY unset).`
        : "Check the proxy's address and that it runs; a proxy password goes in its URL (http://user:password@proxy:3128).";
    return { result: { id: "proxy", status: "fail", code, detail: `${(err as Error).message} (the proxy of ${proxy.from})`, advice, ms: ms(started) } };
  }
}

/** The TLS check's word for an http:// server. */
export function plainServer(s: Server): CheckResult {
  if (isLoopback(s.host)) return { id: "tls", status: "skip", detail: "the server URL is http:// on this machine: no TLS" };
  return {
    id: "tls",
    status: "warn",
    detail: `the server URL is http://: the token and every request cross the network unencrypted`,
    advice: "Give the server TLS (--acme-email, or --tls-cert behind a name) and use --server https://...",
  };
}

export const ms = (started: number) => Math.round(performance.now() - started);
