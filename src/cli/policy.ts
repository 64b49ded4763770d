/**
 * `burrow policy check FILE`: a traffic policy loaded as the server would
 * load it, its errors printed with their lines. `burrow policy test FILE
 * --request ...`: the policy run on one request made from the flags, what
 * matched and what the edge would do printed. Neither connects anywhere
 * (but jwt-validation's key sets, which it fetches as the edge would).
 */
import { readFileSync, statSync } from "node:fs";
import { parseFlags } from "../config/flags.ts";
import { DEFAULT_POLICY_LIMITS, formatPolicyError, loadPolicy, PHASES, ReplaceFailed, rewriteEvent, type ChainOutcome, type Outcome, type Policy, type PolicyError, type PolicyInput } from "../policy/index.ts";
import { PolicyChain } from "../policy/chain.ts";
import { UsageError } from "../usage-error.ts";
import { POLICY_CHECK_DOC, POLICY_CHECK_FLAGS, POLICY_DOC, POLICY_TEST_DOC, POLICY_TEST_FLAGS } from "./policy-flags.ts";
import { helpText } from "./usage.ts";

export async function policyCommand(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  if (sub === undefined || sub === "--help" || sub === "-h") {
    process.stdout.write(helpText(POLICY_DOC));
    return sub === undefined ? 2 : 0;
  }
  if (sub === "check") return check(rest);
  if (sub === "test") return test(rest);
  throw new UsageError(`unknown policy command '${sub}' (burrow policy check FILE, burrow policy test FILE --request 'GET /')`);
}

/** The file's text, or a usage error that says why not (never read past the policy's size cap). */
function readPolicyFile(path: string | undefined, command: string): string {
  if (path === undefined) throw new UsageError(`burrow policy ${command} needs a FILE`);
  try {
    if (statSync(path).size > DEFAULT_POLICY_LIMITS.maxDocumentBytes) throw new UsageError(`${path}: larger than ${DEFAULT_POLICY_LIMITS.maxDocumentBytes / 1024 / 1024} MiB, the cap on a policy`);
    return readFileSync(path, "utf8");
  } catch (err) {
    if (err instanceof UsageError) throw err;
    throw new UsageError(`${path}: cannot read it (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
}

function printErrors(errors: PolicyError[], path: string, json: boolean): number {
  if (json) process.stdout.write(`${JSON.stringify({ ok: false, errors }, null, 2)}\n`);
  else for (const e of errors) console.error(formatPolicyError(e, path));
  return 1;
}

function check(argv: string[]): number {
  const { values, positionals } = parseFlags(argv, POLICY_CHECK_FLAGS, {});
  if (values.help) return void process.stdout.write(helpText(POLICY_CHECK_DOC)), 0;
  if (positionals.length > 1) throw new UsageError(`unexpected argument '${positionals[1]}'`);
  const path = positionals[0];
  const policy = loadPolicy(readPolicyFile(path, "check"), { source: path });
  if (Array.isArray(policy)) return printErrors(policy, path!, values.json === true);
  const size = policy.size;
  if (values.json) process.stdout.write(`${JSON.stringify({ ok: true, rules: size }, null, 2)}\n`);
  else process.stdout.write(`${path}: ok, ${PHASES.map((p) => `${size[p]} rule${size[p] === 1 ? "" : "s"} ${p}`).join(", ")}\n`);
  return 0;
}

/** 'Name: value' from --header. */
function headerPair(text: string, flag: string): [string, string] {
  const colon = text.indexOf(":");
  if (colon <= 0) throw new UsageError(`${flag} '${text}' is not NAME: VALUE`);
  const name = text.slice(0, colon).trim();
  if (!/^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/.test(name)) throw new UsageError(`${flag}: '${name}' is not a header name`);
  return [name, text.slice(colon + 1).trim()];
}

function testInput(values: Record<string, unknown>): PolicyInput {
  const request = String(values.request ?? "");
  const m = /^([A-Z]+)\s+(\/\S*)$/.exec(request.trim());
  if (!m) throw new UsageError(`--request '${request}' is not 'METHOD /path' (such as 'GET /api?x=1')`);
  const host = String(values.host ?? POLICY_TEST_FLAGS.host.default);
  const clientIp = String(values["client-ip"] ?? POLICY_TEST_FLAGS["client-ip"].default);
  if (!/^[0-9a-fA-F.:]+$/.test(clientIp)) throw new UsageError(`--client-ip '${clientIp}' is not an IP address`);
  const headers = ((values.header as string[] | undefined) ?? []).map((h) => headerPair(h, "--header"));
  if (!headers.some(([n]) => n.toLowerCase() === "host")) headers.unshift(["Host", host]);
  const body = values.body === undefined ? undefined : new TextEncoder().encode(String(values.body));
  if (body && !headers.some(([n]) => n.toLowerCase() === "content-length")) headers.push(["Content-Length", String(body.length)]);
  const now = Date.now();
  const input: PolicyInput = {
    conn: { clientIp, clientPort: 50000, serverPort: 443, openedAt: now },
    endpoint: { host, port: 443, protocol: "https", url: `https://${host}` },
    tunnel: { id: "policy-test", name: host.split(".")[0]!, kind: "http", user: "you" },
    request: { method: m[1]!, target: m[2]!, scheme: "https", host, headers, body, receivedAt: now },
    now,
  };
  if (values.status !== undefined) {
    const status = Number(values.status);
    if (!/^\d{3}$/.test(String(values.status)) || status < 100 || status > 599) throw new UsageError(`--status '${values.status}' is not an HTTP status (100-599)`);
    input.response = { status, headers: ((values["response-header"] as string[] | undefined) ?? []).map((h) => headerPair(h, "--response-header")) };
    // events come in an event stream: said so unless the flags say what the answer is
    if (values.event !== undefined && !input.response.headers.some(([n]) => n.toLowerCase() === "content-type")) input.response = { status, headers: [...input.response.headers, ["Content-Type", "text/event-stream"]] };
  } else if (values["response-header"] !== undefined) throw new UsageError("--response-header goes with --status");
  else if (values.event !== undefined) throw new UsageError("--event goes with --status (the answer whose stream it is), such as --status 200");
  return input;
}

/** --event's text as the event's bytes: `\n` a line's end, and the blank line that ends an event added when it is not there. */
function eventBytes(text: string): Uint8Array {
  const lines = text.replaceAll("\\n", "\n");
  return new TextEncoder().encode(/(\r\n|\r|\n){2}$/.test(lines) ? lines : lines.endsWith("\n") ? `${lines}\n` : `${lines}\n\n`);
}

async function test(argv: string[]): Promise<number> {
  const { values, positionals } = parseFlags(argv, POLICY_TEST_FLAGS, {});
  if (values.help) return void process.stdout.write(helpText(POLICY_TEST_DOC)), 0;
  if (positionals.length > 1) throw new UsageError(`unexpected argument '${positionals[1]}'`);
  if (values.request === undefined) throw new UsageError("burrow policy test needs --request 'METHOD /path', such as --request 'GET /'");
  const path = positionals[0];
  const text = readPolicyFile(path, "test");
  const input = testInput(values);
  const policy = loadPolicy(text, { source: path });
  if (Array.isArray(policy)) return printErrors(policy, path!, values.json === true);
  const steps = await runAll(policy, input, values.event !== undefined);
  const last = steps[steps.length - 1]!;
  if (last.phase === "on_event_stream_message" && last.out.verdict.kind === "continue") last.events = ((values.event as string[] | undefined) ?? []).map((e) => eventThrough(eventBytes(e), last.out));
  if (values.json) process.stdout.write(`${JSON.stringify(steps.map(jsonStep), null, 2)}\n`);
  else process.stdout.write(steps.map(describeStep).join(""));
  return 0;
}

interface Step {
  phase: string;
  out: ChainOutcome;
  /** on_event_stream_message's: each --event as the edge would send it. */
  events?: EventSent[];
}

interface EventSent {
  event: string;
  /** What the visitor would get: the event rewritten, as it came, or nothing more of the stream (`cut`, with why). */
  result: "rewritten" | "unchanged" | "cut";
  sent?: string;
  why?: string;
}

/** One event through the phase's rewrites, as the edge applies them (sse-event.ts). */
function eventThrough(bytes: Uint8Array, out: ChainOutcome): EventSent {
  const event = new TextDecoder().decode(bytes);
  const rules = out.response?.streamRewrites ?? [];
  if (rules.length === 0) return { event, result: "unchanged" };
  try {
    const made = rewriteEvent(bytes, rules);
    if (made === "unchanged" || made === "not-utf8") return { event, result: "unchanged" };
    return { event, result: "rewritten", sent: new TextDecoder().decode(made) };
  } catch (err) {
    if (err instanceof ReplaceFailed) return { event, result: "cut", why: err.message };
    throw err;
  }
}

/** An event's lines, quoted, its closing blank line left out. */
const quotedEvent = (event: string) => quoted(event.replace(/(\r\n|\r|\n)+$/, ""));

function describeEvents(events: EventSent[]): string {
  return events
    .map((e, i) => {
      const said = `event ${i + 1}\n${quotedEvent(e.event)}\n`;
      if (e.result === "unchanged") return `${said}=> sent as it came\n`;
      if (e.result === "cut") return `${said}=> the edge would cut the stream before it (${e.why})\n`;
      return `${said}=> sent as\n${quotedEvent(e.sent!)}\n`;
    })
    .join("");
}

/** The phases the edge would run, in order, each on what the one before left (`events`: on_event_stream_message also when it has no rule, for the events given). */
async function runAll(policy: Policy, input: PolicyInput, withEvents: boolean): Promise<Step[]> {
  const chain = new PolicyChain([policy]);
  const steps: Step[] = [];
  const connect = await chain.connect(input);
  steps.push({ phase: "on_tcp_connect", out: connect });
  if (connect.verdict.kind !== "continue") return steps;
  const request = await chain.request({ ...input, response: undefined });
  steps.push({ phase: "on_http_request", out: request });
  if (request.verdict.kind !== "continue" || !input.response) return steps;
  const forwarded = request.request!;
  const response = await chain.response({
    ...input,
    identity: request.identity,
    request: { method: forwarded.method, target: forwarded.target, scheme: forwarded.scheme, host: forwarded.host, headers: forwarded.headers, body: forwarded.body },
  });
  steps.push({ phase: "on_http_response", out: response });
  if (response.verdict.kind !== "continue" || !(withEvents || policy.has("on_event_stream_message"))) return steps;
  // judged on the head as on_http_response left it, as the edge does
  const head = response.response!;
  const events = await chain.eventStream({ ...input, identity: response.identity ?? request.identity, request: response.request ?? input.request, response: { status: head.status, headers: head.headers } });
  steps.push({ phase: "on_event_stream_message", out: events });
  return steps;
}

/** A body's lines, each after a margin that says it is the body. */
const quoted = (body: string) =>
  body
    .replace(/\n$/, "")
    .split("\n")
    .map((line) => `   | ${line}`)
    .join("\n");

function describeRuns(runs: Outcome[]): string {
  let out = "";
  for (const run of runs) {
    for (const rule of run.matched) {
      out += `  rule ${rule.rule} matched\n`;
      for (const a of rule.actions) out += `    ${a.type}: ${a.result}${a.note ? ` (${a.note})` : ""}\n`;
    }
    for (const log of run.logs) out += `  log: ${JSON.stringify(log)}\n`;
    for (const p of run.problems) out += `  ${p.code === "EVALUATION_ERROR" ? "did not evaluate" : p.code} in rule ${p.rule}: ${p.message}\n`;
  }
  return out;
}

function describeStep(step: Step): string {
  const { out } = step;
  const runs = describeRuns(out.runs);
  if (out.runs.length === 0 && step.phase === "on_tcp_connect") return "";
  let text = `${step.phase}\n${runs || "  no rule matched\n"}`;
  const v = out.verdict;
  if (v.kind === "close") return `${text}=> the edge would close the connection (rule ${v.rule}, ${v.action})\n`;
  if (v.kind === "respond") {
    const body = typeof v.response.body === "string" ? v.response.body : Buffer.from(v.response.body).toString("utf8");
    text += `=> the edge would answer ${v.response.status} (rule ${v.rule}, ${v.action})\n`;
    for (const [n, value] of v.response.headers) text += `   ${n}: ${value}\n`;
    if (body !== "") text += `${quoted(body)}\n`;
    return text;
  }
  if (step.phase === "on_http_request") {
    const r = out.request!;
    text += `=> the edge would forward ${r.method} ${r.target} to the service${out.identity ? ` (visitor: ${out.identity})` : ""}\n`;
    for (const [n, value] of r.headers) text += `   ${n}: ${value}\n`;
    // request-body-find-replace's: the body the service would get
    if (r.bodyReplaced && r.body && r.body.byteLength > 0) text += `${quoted(Buffer.from(r.body).toString("utf8"))}\n`;
  } else if (step.phase === "on_http_response") {
    const r = out.response!;
    const rewrites = r.bodyRewrites?.length ?? 0;
    text += `=> the edge would send the service's ${r.status}${rewrites > 0 ? `, its body rewritten by ${rewrites} replacement${rewrites === 1 ? "" : "s"}` : ""}${out.compression ? `, compressed with ${out.compression}` : ""}\n`;
    for (const [n, value] of r.headers) text += `   ${n}: ${value}\n`;
  } else if (step.phase === "on_event_stream_message") {
    const n = out.response?.streamRewrites?.length ?? 0;
    text += n > 0 ? `=> the edge would rewrite each event of the stream by ${n} replacement${n === 1 ? "" : "s"}\n` : "=> the edge would send the stream's events as they come\n";
    if (step.events) text += describeEvents(step.events);
  } else text += "=> the edge would take the connection\n";
  return text;
}

function jsonStep(step: Step): unknown {
  const { out } = step;
  const v = out.verdict;
  const verdict =
    v.kind === "respond"
      ? { kind: v.kind, rule: v.rule, action: v.action, status: v.response.status, headers: v.response.headers, body: typeof v.response.body === "string" ? v.response.body : Buffer.from(v.response.body).toString("base64") }
      : v;
  return {
    phase: step.phase,
    verdict,
    matched: out.runs.flatMap((r) => r.matched),
    problems: out.runs.flatMap((r) => r.problems),
    logs: out.runs.flatMap((r) => r.logs),
    request: out.request ? { method: out.request.method, target: out.request.target, headers: out.request.headers } : undefined,
    response: step.phase === "on_http_response" && out.response ? { status: out.response.status, headers: out.response.headers } : undefined,
    eventReplacements: step.phase === "on_event_stream_message" ? (out.response?.streamRewrites?.length ?? 0) : undefined,
    events: step.events,
    identity: out.identity,
    compression: out.compression,
  };
}
