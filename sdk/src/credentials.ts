/**
 * What a connection to the server needs, from the options or where the
 * `burrow` command keeps them (BURROW_SERVER, BURROW_TOKEN, what `burrow
 * login` saved): where, as whom, and how (a certificate check, a proxy).
 */
import { parseProxyUrl, resolveCredentials } from "../../src/agent/settings/server-and-token.ts";
import type { ConnectOptions } from "../index.d.ts";

export interface Credentials {
  server: string;
  token: string;
  insecure: boolean;
  proxy?: string;
}

/** `read()`'s value, or a TypeError naming the option with what was wrong. */
function checked<T>(option: string, read: () => T): T {
  try {
    return read();
  } catch (err) {
    throw new TypeError(`${option}: ${(err as Error).message}`);
  }
}

export function credentials(options: Pick<ConnectOptions, "server" | "token" | "insecure" | "proxy">): Credentials {
  const proxy = options.proxy;
  if (proxy !== undefined && typeof proxy !== "string") throw new TypeError("proxy must be a URL string such as http://proxy:3128 or socks5://proxy:1080");
  return {
    ...resolveCredentials({ server: options.server, token: options.token }),
    insecure: Boolean(options.insecure),
    ...(proxy ? { proxy: checked("proxy", () => parseProxyUrl(proxy)) } : {}),
  };
}
