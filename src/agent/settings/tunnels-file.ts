/**
 * burrow.yml: the agent's tunnels, by name, for `burrow start`. Read with
 * the `yaml` package because every mistake is reported as one line naming
 * the file, the line and the field (`burrow.yml:7: tunnels.web.subdomain:
 * must be a string`), which needs each node's position; Bun's own YAML
 * parser gives values only.
 *
 *   server: https://tunnels.example.com     # optional, as --server
 *   token: ...                              # optional, as --token
 *   tunnels:
 *     web:
 *       proto: http
 *       addr: 3000
 *       subdomain: myapp
 *     db:
 *       proto: tcp
 *       addr: 5432
 *       remote_port: 40000
 */
import { existsSync, readFileSync, statSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import * as v from "valibot";
import { isMap, isScalar, isSeq, LineCounter, parseDocument, type Pair, type ParsedNode } from "yaml";
import { subdomain as subdomainRule } from "../../validate/fields.ts";
import { isNamedKind, isPortKind } from "../../protocol/kinds.ts";
import { AGENT_KINDS } from "../kinds/index.ts";
import type { HttpAccess } from "../../protocol/messages.ts";
import { parseProxyUrl, parseServerUrl } from "./server-and-token.ts";
import { configDir } from "./paths.ts";
import {
  ACCESS_LIST_MAX,
  oidcSettings,
  parseBasicAuth,
  parseCidr,
  parseEmailRule,
  parseHeaderLine,
  parseHeaderName,
  parseHealthCheck,
  parseHealthInterval,
  parseHostHeader,
  parseUpstreamProtocol,
  parseIssuer,
  parsePoolBalance,
  parseRemotePort,
  parseResponseTimeout,
  parseTarget,
  parseTunnelHostname,
  parseUpgradeToken,
  tooManyEntries,
} from "./tunnel-options.ts";
import { KINDS, kindProblem, listed, OPTION_NAMES, parseKind, specProblem, tunnelOf, type OptionName, type SpecProblem, type SpecTunnel, type TunnelSpec, type Voice } from "./tunnel-spec.ts";
import { UsageError } from "../../usage-error.ts";
import { upstreamH2Readers } from "./upstream-h2.ts";
import { checkRoutes, parsePrefix, type PathRoute } from "../routes.ts";

export const CONFIG_FILE_NAME = "burrow.yml";
/** One HELLO carries at most this many tunnels (protocol/messages.ts). */
export const MAX_TUNNELS = 16;
/** A config file larger than this is not a config file. */
const MAX_FILE_BYTES = 1024 * 1024;
const TUNNEL_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;

/** A tunnel of the file: its name, and what the spec made of its keys. */
export interface FileTunnel extends SpecTunnel {
  name: string;
  /** Where its `policy:` was written: the file it names, or this file for one written in it (its lines are this file's). */
  policyFrom?: string;
}

export interface TunnelsFile {
  path: string;
  server?: string;
  token?: string;
  proxy?: string;
  insecure?: boolean;
  /** In the order the file lists them. */
  tunnels: FileTunnel[];
}

/** A mistake in the file: `FILE:LINE: FIELD: what is wrong`. burrow exits 2 on it. */
export class ConfigFileError extends UsageError {
  constructor(
    path: string,
    readonly line: number,
    /** The field's path, `tunnels.web.subdomain` ("" for the file as a whole). */
    readonly field: string,
    /** What is wrong with it. */
    readonly reason: string,
  ) {
    super(`${path}:${line}: ${field ? `${field}: ` : ""}${reason}`);
  }
}

/**
 * How the text is read. A file (burrow.yml) may name the server and token
 * and policy files beside it, and has at least one tunnel. A tunnels map
 * sent as JSON (the agent API, the server's remote config: tunnels-json.ts)
 * has `tunnels` only, may have none, and writes a policy in it: it names no
 * file, since it is read on another machine than the one it was written on.
 */
export interface ReadMode {
  json?: boolean;
}

/**
 * The file to read: --config (or BURROW_CONFIG) as given, else ./burrow.yml,
 * else burrow.yml in the config directory. Undefined when there is none.
 */
export function findConfigFile(flag: string | undefined, env: Record<string, string | undefined> = process.env, cwd = process.cwd()): string | undefined {
  if (flag !== undefined) {
    const path = resolve(cwd, flag);
    if (!existsSync(path)) throw new UsageError(`--config: ${flag} does not exist`);
    return path;
  }
  for (const path of [join(cwd, CONFIG_FILE_NAME), join(configDir(env), CONFIG_FILE_NAME)]) {
    if (existsSync(path)) return path;
  }
  return undefined;
}

/** Where findConfigFile looks, for the message when there is no file. */
export function configFileCandidates(env: Record<string, string | undefined> = process.env, cwd = process.cwd()): string[] {
  return [join(cwd, CONFIG_FILE_NAME), join(configDir(env), CONFIG_FILE_NAME)];
}

export function readTunnelsFile(path: string): TunnelsFile {
  let text: string;
  try {
    if (statSync(path).size > MAX_FILE_BYTES) throw new UsageError(`${path}: larger than 1 MiB, not a burrow config file`);
    text = readFileSync(path, "utf8");
  } catch (err) {
    if (err instanceof UsageError) throw err;
    throw new UsageError(`${path}: cannot read it (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
  return parseTunnelsFile(text, path);
}

type Node = ParsedNode | null;

/** Parses and checks the text of a burrow.yml; `path` names it in errors. */
export function parseTunnelsFile(text: string, path: string, mode: ReadMode = {}): TunnelsFile {
  const lines = new LineCounter();
  // duplicate keys are found below, where the message can say which tunnel
  const doc = parseDocument(text, { lineCounter: lines, uniqueKeys: false, prettyErrors: false });
  const lineOf = (node: { range?: [number, number, number] | null } | null | undefined) => (node?.range ? lines.linePos(node.range[0]).line : 1);
  const fail = (node: { range?: [number, number, number] | null } | null | undefined, field: string, message: string): never => {
    throw new ConfigFileError(path, lineOf(node), field, message);
  };
  const first = doc.errors[0];
  if (first) throw new ConfigFileError(path, lines.linePos(first.pos[0]).line, "", `not valid YAML: ${first.message.split("\n")[0]}`);

  const root = doc.contents as Node;
  if (root === null) return fail(null, "", "the file is empty: it needs a 'tunnels:' map");
  if (!isMap(root)) return fail(root, "", "must be a map with 'tunnels:' (and optionally server, token, proxy, insecure)");

  const out: TunnelsFile = { path, tunnels: [] };
  let tunnelsNode: Node = null;
  for (const pair of entries(root, "", fail)) {
    const { key, value } = pair;
    if (mode.json && key !== "tunnels") fail(pair.keyNode, key, "unknown key (allowed: tunnels)");
    switch (key) {
      case "server":
        out.server = text_(value, key, fail);
        checkUrl(parseServerUrl, out.server, value, key, fail);
        break;
      case "token":
        out.token = text_(value, key, fail);
        break;
      case "proxy":
        out.proxy = text_(value, key, fail);
        checkUrl(parseProxyUrl, out.proxy, value, key, fail);
        break;
      case "insecure":
        out.insecure = bool(value, key, fail);
        break;
      case "tunnels":
        tunnelsNode = value;
        break;
      default:
        fail(pair.keyNode, key, "unknown key (allowed: server, token, proxy, insecure, tunnels)");
    }
  }
  if (tunnelsNode === null) return fail(root, "tunnels", "missing: the file needs a 'tunnels:' map of named tunnels");
  if (!isMap(tunnelsNode)) return fail(tunnelsNode, "tunnels", "must be a map of named tunnels, such as 'web: { proto: http, addr: 3000 }'");

  const subdomains = new Map<string, string>();
  /** By "tcp PORT" or "udp PORT": the two port spaces are apart. */
  const ports = new Map<string, string>();
  for (const { key: name, keyNode, value } of entries(tunnelsNode, "tunnels", fail)) {
    const field = `tunnels.${name}`;
    if (!TUNNEL_NAME.test(name)) fail(keyNode, field, "a tunnel name is 1-64 letters, digits and _ . - (starting with a letter or digit)");
    if (out.tunnels.some((t) => t.name === name)) fail(keyNode, field, `the tunnel name '${name}' is used twice`);
    const tunnel = readTunnel(name, value, field, fail, { text, path, lines, json: mode.json ?? false });
    const req = tunnel.request;
    if (isNamedKind(req) && req.subdomain !== undefined) {
      const other = subdomains.get(req.subdomain);
      if (other) fail(fieldNode(value, "subdomain"), `${field}.subdomain`, `'${req.subdomain}' is also the subdomain of tunnel '${other}'`);
      subdomains.set(req.subdomain, name);
    }
    if (isPortKind(req) && req.port !== undefined) {
      const key = `${req.protocol} ${req.port}`;
      const other = ports.get(key);
      if (other) fail(fieldNode(value, "remote_port"), `${field}.remote_port`, `${req.port} is also the remote_port of ${req.protocol} tunnel '${other}'`);
      ports.set(key, name);
    }
    out.tunnels.push(tunnel);
  }
  if (out.tunnels.length === 0 && !mode.json) return fail(tunnelsNode, "tunnels", "no tunnels: name at least one");
  if (out.tunnels.length > MAX_TUNNELS) return fail(tunnelsNode, "tunnels", `${out.tunnels.length} tunnels; one agent runs at most ${MAX_TUNNELS}`);
  return out;
}

type Fail = (node: { range?: [number, number, number] | null } | null | undefined, field: string, message: string) => never;

/** burrow.yml's key for each option of the spec: its name in snake case (allowCidr: allow_cidr). */
const KEY_OF = Object.fromEntries(OPTION_NAMES.map((o) => [o, o.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)])) as Record<OptionName, string>;
const OPTION_OF = new Map(OPTION_NAMES.map((o) => [KEY_OF[o], o]));
const TUNNEL_KEYS = ["proto", "addr", ...OPTION_NAMES.map((o) => KEY_OF[o])];
const OIDC_KEYS = ["issuer", "client_id", "client_secret", "allow_emails"];

/** The file's words for the spec's messages. */
const FILE_VOICE: Voice = { name: (option) => KEY_OF[option], on: (option) => `${KEY_OF[option]}: true` };

/** The file being read, for what a key quotes of it (an inline policy) or names beside it (a policy file). */
interface FileText {
  text: string;
  path: string;
  lines: LineCounter;
  /** Sent as JSON (ReadMode): a policy is written in it, never a file's path. */
  json: boolean;
}

function readTunnel(name: string, node: Node, field: string, fail: Fail, file: FileText): FileTunnel {
  if (!isMap(node)) return fail(node, field, "must be a map such as '{ proto: http, addr: 3000 }'");
  const given = new Map<string, { keyNode: Node; value: Node }>();
  for (const { key, keyNode, value } of entries(node, field, fail)) {
    if (!TUNNEL_KEYS.includes(key)) fail(keyNode, `${field}.${key}`, `unknown key (allowed: ${TUNNEL_KEYS.join(", ")})`);
    given.set(key, { keyNode, value });
  }
  const protoNode = given.get("proto");
  if (!protoNode) return fail(node, `${field}.proto`, `missing: ${listed(KINDS, "or")}`);
  const proto = text_(protoNode.value, `${field}.proto`, fail);
  const kind = attempt(protoNode.value, `${field}.proto`, fail, () => parseKind(proto));
  /** The spec's mistakes, at their key's line (the tunnel's, for one not written). */
  const said = (problem: SpecProblem | undefined): void => {
    if (!problem) return;
    const key = problem.option && KEY_OF[problem.option];
    fail((key && given.get(key)?.keyNode) || node, key ? `${field}.${key}` : field, problem.message);
  };
  // an option of another kind is said as such before its value is read
  said(kindProblem(kind, [...given.keys()].flatMap((k) => OPTION_OF.get(k) ?? [])));
  const addrNode = given.get("addr");
  if (!addrNode) return fail(node, `${field}.addr`, "missing: the local port, HOST:PORT or URL, such as 3000");
  const checked = <T>(key: string, read: (raw: string) => T): T | undefined => {
    const entry = given.get(key);
    if (!entry) return undefined;
    const raw = scalarText(entry.value, `${field}.${key}`, fail);
    return attempt(entry.value, `${field}.${key}`, fail, () => read(raw));
  };
  const flag = (key: string) => {
    const entry = given.get(key);
    return entry ? bool(entry.value, `${field}.${key}`, fail) : undefined;
  };
  /** A list of values (a single value is a list of one), each checked, a mistake named by its item's line. */
  const listed_ = <T>(key: string, read: (raw: string) => T, from: Map<string, { value: Node }> = given, prefix = field): T[] | undefined => {
    const entry = from.get(key);
    if (!entry) return undefined;
    const items = isSeq(entry.value) ? (entry.value.items as Node[]) : [entry.value];
    const max = ACCESS_LIST_MAX[key];
    if (max !== undefined && items.length > max) fail(entry.value, `${prefix}.${key}`, tooManyEntries(max, items.length));
    return items.map((item, i) => {
      const where = isSeq(entry.value) ? `${prefix}.${key}[${i}]` : `${prefix}.${key}`;
      return attempt(item, where, fail, () => read(scalarText(item, where, fail)));
    });
  };
  /** Each option's value, read in its own syntax: the spec says what goes with what. */
  const readers: Record<OptionName, () => unknown> = {
    subdomain: () => {
      const entry = given.get("subdomain")!;
      const parsed = v.safeParse(subdomainRule, scalarText(entry.value, `${field}.subdomain`, fail));
      return parsed.success ? parsed.output : fail(entry.value, `${field}.subdomain`, parsed.issues[0]?.message ?? "not a valid subdomain");
    },
    hostname: () => checked("hostname", parseTunnelHostname),
    remotePort: () => checked("remote_port", parseRemotePort),
    pool: () => flag("pool"),
    poolBalance: () => checked("pool_balance", parsePoolBalance),
    healthCheck: () => checked("health_check", parseHealthCheck),
    healthInterval: () => checked("health_interval", parseHealthInterval),
    private: () => flag("private"),
    name: () => checked("name", (raw) => raw),
    share: () => listed_("share", (raw) => raw.split(",").map((u) => u.trim()).filter((u) => u !== ""))?.flat(),
    hostHeader: () => checked("host_header", parseHostHeader),
    upstreamProtocol: () => checked("upstream_protocol", parseUpstreamProtocol),
    ...upstreamH2Readers((option, parse) => checked(KEY_OF[option], parse)),
    routes: () => readRoutes(given.get("routes"), `${field}.routes`, fail),
    allowUpgrade: () => listed_("allow_upgrade", parseUpgradeToken),
    skipWarning: () => flag("skip_warning"),
    responseTimeout: () => checked("response_timeout", parseResponseTimeout),
    inspect: () => flag("inspect"),
    proxyProtocol: () => flag("proxy_protocol"),
    basicAuth: () => listed_("basic_auth", parseBasicAuth),
    allowCidr: () => listed_("allow_cidr", parseCidr),
    denyCidr: () => listed_("deny_cidr", parseCidr),
    requestHeaderAdd: () => listed_("request_header_add", parseHeaderLine),
    requestHeaderRemove: () => listed_("request_header_remove", parseHeaderName),
    responseHeaderAdd: () => listed_("response_header_add", parseHeaderLine),
    oidc: () => readOidc(given.get("oidc"), `${field}.oidc`, fail, listed_),
    policy: () => {
      const read = readPolicy(given.get("policy")!.value, `${field}.policy`, fail, file);
      policyFrom = read.from;
      return read.text;
    },
  };
  let policyFrom: string | undefined;
  const spec: TunnelSpec = { kind, target: checked("addr", (raw) => parseTarget(raw, AGENT_KINDS[kind].urlTarget))! };
  for (const key of given.keys()) {
    const option = OPTION_OF.get(key);
    if (option) (spec as unknown as Record<string, unknown>)[option] = readers[option]();
  }
  said(specProblem(spec, FILE_VOICE));
  return { name, ...attempt(given.get("allow_upgrade")?.value ?? node, `${field}.allow_upgrade`, fail, () => tunnelOf(spec)), ...(policyFrom !== undefined ? { policyFrom } : {}) };
}

/**
 * policy: the tunnel's own traffic policy, written here (a map, YAML as
 * the policy file's) or a file beside this one (a path, relative to this
 * file). One written here is sent as its own lines of this file, the lines
 * before it blank and its first line indented as here, so every mistake
 * the policy's checks find (here, and at the edge) names this file's line.
 */
function readPolicy(node: Node, field: string, fail: Fail, file: FileText): { text: string; from: string } {
  if (isMap(node) && node.range) {
    const at = file.lines.linePos(node.range[0]);
    return { text: `${"\n".repeat(at.line - 1)}${" ".repeat(at.col - 1)}${file.text.slice(node.range[0], node.range[1])}`, from: file.path };
  }
  if (file.json) return fail(node, field, "must be a policy: a map of on_tcp_connect, on_http_request, on_http_response, on_event_stream_message (written here, not a file's path)");
  if (!isScalar(node) || typeof node.value !== "string" || node.value.trim() === "") {
    return fail(node, field, "must be a policy (a map of on_tcp_connect, on_http_request, on_http_response, on_event_stream_message) or the path of a policy file");
  }
  const policyPath = resolve(dirname(file.path), node.value);
  try {
    // a policy that cannot travel in a handshake is refused by its length after this (tunnel-spec.ts); a larger file is not read whole
    if (statSync(policyPath).size > MAX_FILE_BYTES) return fail(node, field, `${node.value} is larger than 1 MiB, not a tunnel's policy`);
    return { text: readFileSync(policyPath, "utf8"), from: policyPath };
  } catch (err) {
    if (err instanceof ConfigFileError) throw err;
    return fail(node, field, `cannot read ${node.value} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
}

/** `read()`'s value, or its UsageError as a mistake at this node (a ConfigFileError already names its own). */
function attempt<T>(node: Node, field: string, fail: Fail, read: () => T): T {
  try {
    return read();
  } catch (err) {
    if (err instanceof UsageError && !(err instanceof ConfigFileError)) return fail(node, field, err.message);
    throw err;
  }
}

type Listed = <T>(key: string, read: (raw: string) => T, from: Map<string, { value: Node }>, prefix: string) => T[] | undefined;

/** routes: { /api: 8080, /ws: "127.0.0.1:9000" }: path prefixes to other local services (agent/routes.ts). */
function readRoutes(entry: { keyNode: Node; value: Node } | undefined, field: string, fail: Fail): PathRoute[] | undefined {
  if (!entry) return undefined;
  if (!isMap(entry.value)) return fail(entry.value, field, "must be a map of paths to addresses, such as { /api: 8080 }");
  const routes: PathRoute[] = [];
  for (const { key, keyNode, value } of entries(entry.value, field, fail)) {
    const where = `${field}.${key}`;
    try {
      routes.push({ prefix: parsePrefix(key), target: parseTarget(scalarText(value, where, fail), true) });
    } catch (err) {
      if (err instanceof UsageError && !(err instanceof ConfigFileError)) return fail(/^\//.test(key) ? value : keyNode, where, err.message);
      throw err;
    }
  }
  try {
    return checkRoutes(routes);
  } catch (err) {
    if (err instanceof UsageError && !(err instanceof ConfigFileError)) return fail(entry.value, field, err.message);
    throw err;
  }
}

/** oidc: { issuer, client_id, client_secret, allow_emails: [...] } */
function readOidc(entry: { keyNode: Node; value: Node } | undefined, field: string, fail: Fail, listed: Listed): HttpAccess["oidc"] {
  if (!entry) return undefined;
  if (!isMap(entry.value)) return fail(entry.value, field, "must be a map: { issuer, client_id, client_secret, allow_emails }");
  const given = new Map<string, { keyNode: Node; value: Node }>();
  for (const { key, keyNode, value } of entries(entry.value, field, fail)) {
    if (!OIDC_KEYS.includes(key)) fail(keyNode, `${field}.${key}`, `unknown key (allowed: ${OIDC_KEYS.join(", ")})`);
    given.set(key, { keyNode, value });
  }
  const textOf = (key: string) => {
    const e = given.get(key);
    return e ? scalarText(e.value, `${field}.${key}`, fail) : undefined;
  };
  const issuer = textOf("issuer");
  if (issuer !== undefined) {
    try {
      parseIssuer(issuer);
    } catch (err) {
      if (err instanceof UsageError) fail(given.get("issuer")!.value, `${field}.issuer`, err.message);
      throw err;
    }
  }
  const allowEmails = listed("allow_emails", parseEmailRule, given, field) ?? [];
  try {
    return oidcSettings(
      { issuer, clientId: textOf("client_id"), clientSecret: textOf("client_secret"), allowEmails },
      { issuer: "issuer", clientId: "client_id", clientSecret: "client_secret", allowEmails: "allow_emails" },
    );
  } catch (err) {
    if (err instanceof UsageError) return fail(entry.value, field, err.message);
    throw err;
  }
}

/** A map's entries with plain string keys; anything else as a key is an error. */
function entries(map: Node, field: string, fail: Fail): { key: string; keyNode: Node; value: Node }[] {
  const items = (map as unknown as { items: Pair<Node, Node>[] }).items;
  const seen = new Set<string>();
  return items.map((pair) => {
    const keyNode = pair.key;
    if (!isScalar(keyNode) || (typeof keyNode.value !== "string" && typeof keyNode.value !== "number")) {
      return fail(keyNode ?? map, field, "keys must be plain names");
    }
    const key = String(keyNode.value);
    // a tunnel name twice is reported by the caller with its own words
    if (seen.has(key) && field !== "tunnels") fail(keyNode, field ? `${field}.${key}` : key, "is given twice");
    seen.add(key);
    // `key:` with nothing after it: errors about the value point at the key's line
    const value = pair.value ?? ({ range: keyNode.range } as unknown as Node);
    return { key, keyNode, value };
  });
}

function fieldNode(map: Node, key: string): Node {
  if (!isMap(map)) return map;
  const pair = (map.items as Pair<Node, Node>[]).find((p) => isScalar(p.key) && String(p.key.value) === key);
  return pair?.value ?? map;
}

/** A scalar written as text or a number (addr: 3000), as the text it reads. */
function scalarText(node: Node, field: string, fail: Fail): string {
  if (isScalar(node) && (typeof node.value === "string" || typeof node.value === "number")) return String(node.value);
  return fail(node, field, "must be a single value, not a list or a map");
}

/** server: and proxy: are checked here as their flags are, so a mistake names the file's line, not a flag. */
function checkUrl(parse: (raw: string) => string, raw: string, node: Node, field: string, fail: Fail): void {
  try {
    parse(raw);
  } catch (err) {
    if (err instanceof UsageError) fail(node, field, err.message);
    throw err;
  }
}

function text_(node: Node, field: string, fail: Fail): string {
  if (isScalar(node) && typeof node.value === "string") return node.value;
  return fail(node, field, "must be a string");
}

function bool(node: Node, field: string, fail: Fail): boolean {
  if (isScalar(node) && typeof node.value === "boolean") return node.value;
  return fail(node, field, "must be true or false");
}
