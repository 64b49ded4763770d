/**
 * What a connection to the server needs, from the options or where the
 * `burrow` command keeps them (BURROW_SERVER, BURROW_TOKEN, what `burrow
 * login` saved): where, as whom, and how (a certificate check, a proxy).
 */
import { parseProxyUrl, resolveCredentials } from "../../src/agent/settings/server-and-token.ts";
import type { ConnectOptions } from "../index.d.ts";
import { checked } from "./errors.ts";

export interface Credentials {
  server: string;
  token: string;
  insecure: boolean;
  proxy?: string;
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
