/**
 * The checks in their order, each given what the ones before found. A
 * check that needs one that failed is skipped, saying which. Through a
 * proxy, the proxy is asked first (the agent reaches the server only
 * through it) and TCP and TLS are checked through it; the report still
 * tells them in their order. With --remote, the server's config for the
 * token is read before the tunnels (remote-checks.ts), and its tunnels are
 * judged with the file's.
 */
import type { Socket } from "node:net";
import { checkDirect, checkWebSocket } from "./agent-path-checks.ts";
import { skipped, type CheckResult, type DiagnoseSettings } from "./checks.ts";
import { checkDns, checkProxy, checkTcp, checkTls, plainServer } from "./network-checks.ts";
import { openTcp, openThroughProxy, openTls, serverOf } from "./reach.ts";
import { remoteTunnels } from "./remote-checks.ts";
import { askAgentsPath, checkClock, checkWithServer } from "./server-checks.ts";

export async function runChecks(settings: DiagnoseSettings): Promise<CheckResult[]> {
  const s = serverOf(settings.server);
  const { timeoutMs } = settings;
  const proxy = settings.proxy;
  const out: CheckResult[] = [];
  const rest = (why: string) => [
    ...(["websocket", "direct", "clock", "protocol", "token", ...(settings.remote ? (["remote"] as const) : [])] as const).map((id) => skipped(id, why)),
    ...settings.tunnels.map((t) => skipped("tunnel", why, t.name)),
  ];

  const dns = await checkDns(s, timeoutMs, proxy !== undefined);
  out.push(dns);
  if (dns.status === "fail") return [...out, skipped("tcp", "needs the name resolved"), skipped("tls", "needs the name resolved"), skipped("proxy", "none set"), ...rest("needs the name resolved")];

  let socket: Socket | undefined;
  let proxyResult: CheckResult;
  if (proxy) {
    const through = await checkProxy(s, proxy, timeoutMs);
    proxyResult = through.result;
    socket = through.socket;
    if (!socket) return [...out, skipped("tcp", "needs the proxy (below)"), skipped("tls", "needs the proxy (below)"), proxyResult, ...rest("needs the proxy")];
    out.push({ id: "tcp", status: "pass", detail: `connected to ${s.host}:${s.port} through the proxy` });
  } else {
    proxyResult = skipped("proxy", "none set (--proxy, the config file's proxy:, HTTPS_PROXY or ALL_PROXY)");
    const tcp = await checkTcp(s, timeoutMs);
    out.push(tcp.result);
    socket = tcp.socket;
    if (!socket) return [...out, skipped("tls", "needs a TCP connection"), proxyResult, ...rest("needs a TCP connection")];
  }

  if (s.secure) {
    const tls = await checkTls(s, socket, timeoutMs, settings.insecure);
    out.push(tls.result);
    tls.tls?.socket.destroy();
    if (tls.result.status === "fail") return [...out, proxyResult, ...rest("needs TLS the agent accepts")];
  } else {
    socket.destroy();
    out.push(plainServer(s));
  }
  out.push(proxyResult);

  /** A new connection to the server as the agent makes it (through the proxy, TLS when https). */
  const open = async (): Promise<Socket> => {
    const raw = proxy ? await openThroughProxy(new URL(proxy.url), s.host, s.port, timeoutMs) : await openTcp(s.host, s.port, timeoutMs);
    return s.secure ? (await openTls(raw, s.host, timeoutMs)).socket : raw;
  };
  out.push(await checkWebSocket(s, proxy?.url, settings.insecure, timeoutMs));
  const question = await askAgentsPath(s, open, timeoutMs);
  out.push(await checkDirect(s, question.directPort, proxy !== undefined, settings.insecure, timeoutMs));
  out.push(checkClock(question, settings.clockToleranceS));
  if (!settings.remote) {
    out.push(...(await checkWithServer(s, settings, open)));
    return out;
  }
  // --remote: the server's config first, then its tunnels judged with the file's, as the agent would run them
  const remote = await remoteTunnels(s, settings, open);
  const judged = await checkWithServer(s, { ...settings, tunnels: remote.tunnels }, open);
  const tunnels = judged.filter((r) => r.id === "tunnel").map((r) => (r.tunnel !== undefined && remote.fromServer.has(r.tunnel) ? { ...r, detail: `${r.detail} (the server's config)` } : r));
  out.push(...judged.filter((r) => r.id !== "tunnel"), remote.result, ...tunnels, ...remote.notJudged);
  return out;
}
