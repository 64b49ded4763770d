/**
 * The agent's settings: --server / --token (or --token-file), else
 * BURROW_SERVER / BURROW_TOKEN (or BURROW_TOKEN_FILE), else the file
 * `burrow login` wrote (config.json, mode 0600, in the platform's config
 * directory: paths.ts).
 */
import { chmodSync, closeSync, existsSync, mkdirSync, openSync, readFileSync, readSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import * as v from "valibot";
import { configFile } from "./paths.ts";
import { UsageError } from "../../usage-error.ts";
import { hidePassword } from "../../log-redact.ts";

const SavedConfig = v.object({ server: v.optional(v.string()), token: v.optional(v.string()) });
export type SavedConfig = v.InferOutput<typeof SavedConfig>;

export function configPath(env: Record<string, string | undefined> = process.env): string {
  return configFile(env);
}

export function readSavedConfig(env: Record<string, string | undefined> = process.env): SavedConfig {
  const path = configPath(env);
  if (!existsSync(path)) return {};
  try {
    return v.parse(SavedConfig, JSON.parse(readFileSync(path, "utf8")));
  } catch {
    throw new UsageError(`${path} is not a valid burrow config file (run burrow login again)`);
  }
}

export function saveConfig(config: SavedConfig, env: Record<string, string | undefined> = process.env): string {
  const path = configPath(env);
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  writeFileSync(path, JSON.stringify(config, null, 2) + "\n", { mode: 0o600 });
  chmodSync(path, 0o600); // writeFileSync keeps an existing file's mode
  return path;
}

/** A server URL as given: "tunnels.example.com" means http://tunnels.example.com. */
export function normaliseServerUrl(raw: string): string {
  try {
    return parseServerUrl(raw);
  } catch (err) {
    if (err instanceof UsageError) throw new UsageError(`--server: ${err.message}`);
    throw err;
  }
}

/** normaliseServerUrl's check, its message without the flag's name (burrow.yml's `server:` names its own line). */
export function parseServerUrl(raw: string): string {
  const withScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(raw) ? raw : `http://${raw}`;
  let url: URL;
  try {
    url = new URL(withScheme);
  } catch {
    throw new UsageError(`'${hidePassword(raw)}' is not a URL such as https://tunnels.example.com`);
  }
  if (!["http:", "https:", "ws:", "wss:"].includes(url.protocol)) {
    throw new UsageError(`'${hidePassword(raw)}' must be an http:// or https:// URL`);
  }
  return `${url.protocol}//${url.host}`;
}

/**
 * The most a token file may hold. A token is some 50 characters; the cap
 * only keeps a wrong path (a log, a device) from being read whole.
 */
export const MAX_TOKEN_FILE_BYTES = 4096;

/**
 * The token in a file (a container's secret, mounted read-only): one line,
 * whitespace around it ignored. What the file holds is never quoted back.
 */
export function readTokenFile(path: string, from: string): string {
  let fd: number;
  try {
    fd = openSync(path, "r");
  } catch (err) {
    throw new UsageError(`${from}: cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? "error"})`);
  }
  const buf = Buffer.alloc(MAX_TOKEN_FILE_BYTES + 1);
  let length = 0;
  try {
    // read until the end or one byte past the cap, whatever the file is (a FIFO gives its bytes in pieces)
    for (let n = -1; n !== 0 && length < buf.length; length += n) n = readSync(fd, buf, length, buf.length - length, null);
  } catch (err) {
    throw new UsageError(`${from}: cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? "error"})`);
  } finally {
    closeSync(fd);
  }
  if (length > MAX_TOKEN_FILE_BYTES) throw new UsageError(`${from}: ${path} is larger than a token file may be (${MAX_TOKEN_FILE_BYTES} bytes)`);
  const token = buf.subarray(0, length).toString("utf8").trim();
  if (token === "") throw new UsageError(`${from}: ${path} is empty`);
  if (/\s/.test(token)) throw new UsageError(`${from}: ${path} holds more than one word; it must hold the token alone`);
  return token;
}

/** A token from its value or its file, given one way only (both is a mistake the user should hear of). */
function tokenOf(value: string | undefined, file: string | undefined, names: [string, string]): string | undefined {
  if (value && file) throw new UsageError(`${names[0]} and ${names[1]} both give the token: keep one`);
  return value || (file ? readTokenFile(file, names[1]) : undefined);
}

/**
 * Server and token: the flags, else BURROW_SERVER / BURROW_TOKEN, else a
 * config file's (burrow.yml's `server:` / `token:`), else burrow login's.
 * The token may come from a file instead: --token-file, BURROW_TOKEN_FILE.
 */
export function resolveCredentials(
  flags: { server?: string; token?: string; tokenFile?: string },
  env: Record<string, string | undefined> = process.env,
  file: { server?: string; token?: string } = {},
) {
  const server0 = flags.server || env.BURROW_SERVER || file.server;
  const token0 =
    tokenOf(flags.token, flags.tokenFile, ["--token", "--token-file"]) ||
    tokenOf(env.BURROW_TOKEN, env.BURROW_TOKEN_FILE, ["BURROW_TOKEN", "BURROW_TOKEN_FILE"]) ||
    file.token;
  const saved = server0 && token0 ? {} : readSavedConfig(env);
  const server = server0 || saved.server;
  const token = token0 || saved.token;
  if (!server) throw new UsageError("no server: pass --server URL, set BURROW_SERVER, or run burrow login");
  if (!token) throw new UsageError("no token: pass --token T, set BURROW_TOKEN, or run burrow login");
  return { server: normaliseServerUrl(server), token };
}

/** --proxy, else HTTPS_PROXY / ALL_PROXY (either case). */
export function resolveProxy(flag: string | undefined, env: Record<string, string | undefined> = process.env): string | undefined {
  const raw = flag || env.HTTPS_PROXY || env.https_proxy || env.ALL_PROXY || env.all_proxy;
  if (!raw) return undefined;
  try {
    return parseProxyUrl(raw);
  } catch (err) {
    if (err instanceof UsageError) throw new UsageError(`--proxy: ${err.message}`);
    throw err;
  }
}

/** resolveProxy's check, its message without the flag's name; a password in the URL is never shown. */
export function parseProxyUrl(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new UsageError(`'${hidePassword(raw)}' is not a URL such as http://proxy:3128 or socks5://proxy:1080`);
  }
  if (!["http:", "https:", "socks5:", "socks5h:"].includes(url.protocol)) {
    throw new UsageError(`'${hidePassword(raw)}' must be http://, https:// or socks5://`);
  }
  return url.toString();
}
