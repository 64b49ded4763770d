/**
 * The agent's HTTP/2 client limits toward a tunnel's service (with
 * --upstream-protocol h2c or h2) as tunnel options, in one table: the limit
 * of http2/client-limits.ts each sets, its unit and its range. The flags
 * are named as the server's --h2-* flags for the same bound toward visitors,
 * with "upstream-" before them, as --upstream-protocol is
 * (--upstream-h2-max-concurrent-streams, --upstream-h2-max-header-list,
 * --upstream-h2-idle-timeout...); burrow.yml's keys are the same in snake
 * case (upstream_h2_idle_timeout). Like the tunnel's other options they have
 * no environment variable: they are a tunnel's, not the agent's. An option
 * left out keeps its limit's default (DEFAULT_H2_CLIENT_LIMITS).
 */
import { DEFAULT_H2_CLIENT_LIMITS, type Http2ClientLimits } from "../../http2/client-limits.ts";
import { UsageError } from "../../usage-error.ts";

interface UpstreamH2Option {
  /** The limit it sets. */
  limit: keyof Http2ClientLimits;
  /** What its value counts: seconds are the limit's milliseconds. */
  unit: "streams" | "bytes" | "seconds";
  min: number;
  max: number;
}

export const UPSTREAM_H2_OPTIONS = {
  upstreamH2MaxConcurrentStreams: { limit: "maxStreams", unit: "streams", min: 1, max: 1000 },
  upstreamH2MaxHeaderList: { limit: "maxHeaderListBytes", unit: "bytes", min: 1024, max: 1_048_576 },
  upstreamH2StreamWindow: { limit: "streamWindow", unit: "bytes", min: 16_384, max: 16_777_216 },
  upstreamH2MaxQueuedControl: { limit: "maxQueuedControlBytes", unit: "bytes", min: 65_536, max: 67_108_864 },
  upstreamH2IdleTimeout: { limit: "idleTimeoutMs", unit: "seconds", min: 1, max: 3600 },
  upstreamH2SettingsTimeout: { limit: "settingsTimeoutMs", unit: "seconds", min: 1, max: 300 },
} as const satisfies Record<string, UpstreamH2Option>;

export type UpstreamH2OptionName = keyof typeof UPSTREAM_H2_OPTIONS;
export const UPSTREAM_H2_OPTION_NAMES = Object.keys(UPSTREAM_H2_OPTIONS) as UpstreamH2OptionName[];

/** The options' values, as the tunnel spec has them (a number in the option's unit); an option not given is undefined. */
export type UpstreamH2Values = Partial<Record<UpstreamH2OptionName, number>>;

/** Their entries in the spec's table of options (tunnel-spec.ts): http tunnels take them. */
export const UPSTREAM_H2_TUNNEL_OPTIONS = Object.fromEntries(UPSTREAM_H2_OPTION_NAMES.map((o) => [o, { kinds: ["http"] as const }])) as Record<
  UpstreamH2OptionName,
  { readonly kinds: readonly ["http"] }
>;

/** An option's default, in its own unit. */
export function upstreamH2Default(option: UpstreamH2OptionName): number {
  const { limit, unit } = UPSTREAM_H2_OPTIONS[option];
  return unit === "seconds" ? DEFAULT_H2_CLIENT_LIMITS[limit] / 1000 : DEFAULT_H2_CLIENT_LIMITS[limit];
}

/** An option's value as a person writes it: a whole number in its range. */
export function parseUpstreamH2(option: UpstreamH2OptionName, raw: string): number {
  const { unit, min, max } = UPSTREAM_H2_OPTIONS[option];
  const value = /^[0-9]{1,9}$/.test(raw) ? Number(raw) : Number.NaN;
  if (!(value >= min && value <= max)) {
    throw new UsageError(`must be a whole number${unit === "streams" ? "" : ` of ${unit}`} from ${min} to ${max} (got '${raw.replace(/[^\x20-\x7e]/g, "?").slice(0, 40)}')`);
  }
  return value;
}

/** A front-end's reading of one option: its value checked by `parse` (a mistake said in the front-end's words), undefined when not given. */
type Read = (option: UpstreamH2OptionName, parse: (raw: string) => number) => number | undefined;

/** Each option's reader, for a front-end that reads its options one by one (burrow.yml). */
export function upstreamH2Readers(read: Read): Record<UpstreamH2OptionName, () => number | undefined> {
  return Object.fromEntries(UPSTREAM_H2_OPTION_NAMES.map((o) => [o, () => read(o, (raw) => parseUpstreamH2(o, raw))])) as Record<UpstreamH2OptionName, () => number | undefined>;
}

/** Every option's value, read at once (the flags). */
export function readUpstreamH2(read: Read): UpstreamH2Values {
  return Object.fromEntries(Object.entries(upstreamH2Readers(read)).map(([o, reader]) => [o, reader()]));
}

/** They bound the agent's HTTP/2 to the service: without it they would bound nothing, which is a mistake to say. */
export function upstreamH2Problem(
  spec: UpstreamH2Values & { upstreamProtocol?: string },
  say: { name(option: "upstreamProtocol"): string },
): { option: UpstreamH2OptionName; message: string } | undefined {
  if (spec.upstreamProtocol === "h2c" || spec.upstreamProtocol === "h2") return undefined;
  const option = UPSTREAM_H2_OPTION_NAMES.find((o) => spec[o] !== undefined);
  return option && { option, message: `goes with ${say.name("upstreamProtocol")} h2c or h2` };
}

/** The limits a tunnel's options set, the others at their defaults; undefined when it sets none. */
export function upstreamH2Limits(spec: UpstreamH2Values): Http2ClientLimits | undefined {
  let limits: Http2ClientLimits | undefined;
  for (const option of UPSTREAM_H2_OPTION_NAMES) {
    const value = spec[option];
    if (value === undefined) continue;
    const { limit, unit } = UPSTREAM_H2_OPTIONS[option];
    limits ??= { ...DEFAULT_H2_CLIENT_LIMITS };
    limits[limit] = unit === "seconds" ? value * 1000 : value;
  }
  return limits;
}
