/**
 * A tunnel from the flags of `burrow http|tcp|tls|udp`: each flag's value
 * read and checked (agent/settings/tunnel-options.ts), then handed to the
 * one tunnel spec (agent/settings/tunnel-spec.ts), which decides what goes
 * with what and says it in the flags' names.
 */
import type { LocalTarget } from "../agent/http.ts";
import { checkRoutes } from "../agent/routes.ts";
import {
  parseHealthCheck,
  parseHealthInterval,
  parseHostHeader,
  parsePoolBalance,
  parseRemotePort,
  parseResponseTimeout,
  parseRoute,
  parseTunnelHostname,
  parseUpgradeToken,
  parseUpstreamProtocol,
} from "../agent/settings/tunnel-options.ts";
import { specProblem, tunnelOf, type Kind, type OptionName, type SpecTunnel, type TunnelSpec, type Voice } from "../agent/settings/tunnel-spec.ts";
import { readUpstreamH2 } from "../agent/settings/upstream-h2.ts";
import { KINDS } from "../protocol/kinds.ts";
import { UsageError } from "../usage-error.ts";
import { accessOptions } from "./access-flags.ts";
import { checkTunnelPolicy, readTunnelPolicy } from "./tunnel-policy.ts";

/** The flag of each option, where it is not the option's name with dashes. */
const FLAG_OF: Partial<Record<OptionName, string>> = { routes: "--route", oidc: "--oidc-issuer", policy: "--policy-file" };

/** The flags' words for the spec's messages. */
export const FLAG_VOICE: Voice = {
  name: (option) => FLAG_OF[option] ?? `--${option.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`,
  on: (option) => `--${option}`,
};

/** A value's check, its message led by the flag's name. */
export function flagValue<T>(flag: string, check: () => T): T {
  try {
    return check();
  } catch (err) {
    if (err instanceof UsageError) throw new UsageError(`${flag} ${err.message}`);
    throw err;
  }
}

/** A string flag's value, checked; undefined when not given. */
function read<T>(values: Record<string, unknown>, flag: string, parse: (raw: string) => T): T | undefined {
  const raw = values[flag] as string | undefined;
  return raw === undefined ? undefined : flagValue(`--${flag}`, () => parse(raw));
}

const on = (values: Record<string, unknown>, flag: string): true | undefined => (values[flag] ? true : undefined);

/** The policy file's text, its flag named in its errors (once: readTunnelPolicy names it). */
function policyFile(values: Record<string, unknown>): string | undefined {
  const flag = policyFlag(values);
  const path = values[flag] as string | undefined;
  return path === undefined ? undefined : readTunnelPolicy(path, `--${flag}`);
}

/** Which of the policy file's two names was given (--traffic-policy-file is ngrok's); both at once is a mistake. */
function policyFlag(values: Record<string, unknown>): "policy-file" | "traffic-policy-file" {
  if (values["policy-file"] !== undefined && values["traffic-policy-file"] !== undefined) throw new UsageError("--policy-file and --traffic-policy-file are one flag (the second is ngrok's name): give one");
  return values["traffic-policy-file"] !== undefined ? "traffic-policy-file" : "policy-file";
}

/** The tunnel a command's flags ask for (the flags it has: the others are undefined), or a UsageError naming the flag. */
export function tunnelFromFlags(kind: Kind, values: Record<string, unknown>, target: LocalTarget): SpecTunnel {
  // the balance has a default: said to go with --pool only when another one is asked for
  const balance = read(values, "pool-balance", parsePoolBalance);
  const routes = ((values.route as string[] | undefined) ?? []).map((raw) => flagValue("--route", () => parseRoute(raw)));
  const upgrades = ((values["allow-upgrade"] as string[] | undefined) ?? []).map((raw) => flagValue("--allow-upgrade", () => parseUpgradeToken(raw)));
  const share = values.share as string | undefined;
  const spec: TunnelSpec = {
    kind,
    target,
    subdomain: values.subdomain as string | undefined,
    hostname: read(values, "hostname", parseTunnelHostname),
    remotePort: read(values, "remote-port", parseRemotePort),
    pool: on(values, "pool"),
    poolBalance: values.pool || balance !== "round-robin" ? balance : undefined,
    healthInterval: read(values, "health-interval", parseHealthInterval),
    healthCheck: read(values, "health-check", parseHealthCheck),
    private: on(values, "private"),
    name: values.name as string | undefined,
    share: share === undefined ? undefined : share.split(",").map((u) => u.trim()).filter((u) => u !== ""),
    hostHeader: read(values, "host-header", parseHostHeader),
    upstreamProtocol: read(values, "upstream-protocol", parseUpstreamProtocol),
    ...readUpstreamH2((option, parse) => read(values, FLAG_VOICE.name(option).slice(2), parse)),
    routes: routes.length > 0 ? flagValue("--route", () => checkRoutes(routes)) : undefined,
    allowUpgrade: upgrades.length > 0 ? upgrades : undefined,
    skipWarning: on(values, "skip-warning"),
    responseTimeout: read(values, "response-timeout", parseResponseTimeout),
    proxyProtocol: on(values, "proxy-protocol"),
    ...accessOptions(values, KINDS[kind].access === "http"),
    policy: policyFile(values),
  };
  // a repeatable flag not given is an empty list; --share "" is given, and goes with --private only
  for (const key of Object.keys(spec) as (keyof TunnelSpec)[]) {
    const value = spec[key];
    if (value === undefined || (Array.isArray(value) && value.length === 0 && key !== "share")) delete spec[key];
  }
  const problem = specProblem(spec, FLAG_VOICE);
  if (problem) throw new UsageError(problem.option ? `${FLAG_VOICE.name(problem.option)}: ${problem.message}` : problem.message);
  // loaded as the edge will load it: a mistake is told with its line before anything connects
  if (spec.policy !== undefined) checkTunnelPolicy(spec.policy, values[policyFlag(values)] as string, kind === "http");
  return flagValue("--allow-upgrade", () => tunnelOf(spec));
}
