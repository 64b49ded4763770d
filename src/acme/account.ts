/**
 * The ACME account: one key per data dir, `<dataDir>/acme/account.key`
 * (ECDSA P-256, mode 0600 in a 0700 directory), made on first use and kept
 * for good; losing it loses nothing a new one cannot get back, but keeping
 * it keeps the CA's rate limits and history on one account.
 *
 * The account URL the CA gave for that key is cached per directory URL in
 * `<dataDir>/acme/account.json`, so a restart costs no request. Registration
 * agrees to the CA's terms (running `--acme-email` is the operator's
 * agreement) and gives the email as contact. Asking to register a key the CA
 * knows returns the existing account, and its contact is updated, so a
 * changed email or a lost cache only costs that one request.
 */
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import * as acme from "acme-client";
import { systemClock, type Clock } from "../core/clock.ts";
import { failureOf, type AcmeResult } from "./errors.ts";
import { ensurePrivateDir, writePrivateFile } from "../tls/private-files.ts";

/** Let's Encrypt's production directory: the default CA. */
export const LETS_ENCRYPT_DIRECTORY = acme.directory.letsencrypt.production;
/** Let's Encrypt's staging directory: untrusted certificates, generous rate limits; for trying a setup. */
export const LETS_ENCRYPT_STAGING_DIRECTORY = acme.directory.letsencrypt.staging;

/** Under the data dir: the account, and certs/ (certificate-store.ts). */
export const ACME_SUBDIR = "acme";
export const ACCOUNT_KEY_FILE = "account.key";
export const ACCOUNT_CACHE_FILE = "account.json";

/**
 * How acme-client polls a challenge or order until the CA has settled it:
 * the first look at once, then after min, 2 min, 4 min... capped at max.
 * Let's Encrypt validates within seconds; 20 looks span about 3 minutes.
 */
export const POLL_DEFAULTS = { minMs: 1_000, maxMs: 10_000, attempts: 20 } as const;

export interface AccountOptions {
  dataDir: string;
  /** The CA's directory, e.g. Let's Encrypt's https://acme-v02.api.letsencrypt.org/directory. */
  directoryUrl: string;
  /** The contact the CA writes to about expiring certificates and policy changes. */
  email?: string;
  poll?: Partial<{ minMs: number; maxMs: number; attempts: number }>;
  /** Several nodes: the cluster's key (acme/shared.ts), given a way to make one; by default the data dir's. */
  sharedKey?: (make: () => Promise<string>) => Promise<string>;
}

export interface AcmeAccount {
  client: acme.Client;
  url: string;
  directoryUrl: string;
}

interface CachedAccount {
  url: string;
  email: string | null;
  /** The key's SHA-256 (hex): a URL cached for another key (a node that joined a cluster) is not this one's. */
  key?: string;
}

type AccountCache = Record<string, CachedAccount>;

export const acmeDir = (dataDir: string) => join(dataDir, ACME_SUBDIR);

/** The account for this data dir at this CA: loaded, or registered (with terms agreed) on first use. */
export async function openAccount(opts: AccountOptions, clock: Clock = systemClock): Promise<AcmeResult<AcmeAccount>> {
  const dir = acmeDir(opts.dataDir);
  let accountKey: string;
  let cache: AccountCache;
  try {
    ensurePrivateDir(dir);
    accountKey = opts.sharedKey ? await opts.sharedKey(newKey) : await loadOrCreateKey(join(dir, ACCOUNT_KEY_FILE));
    cache = readCache(join(dir, ACCOUNT_CACHE_FILE));
  } catch (err) {
    return { ok: false, error: failureOf(err, "STORAGE_FAILED", clock.now()) };
  }
  const email = opts.email ?? null;
  const poll = { ...POLL_DEFAULTS, ...opts.poll };
  const keyHash = createHash("sha256").update(accountKey).digest("hex");
  const entry = cache[opts.directoryUrl];
  // an entry from before keys were recorded is this data dir's own key's
  const cached = entry && (entry.key ?? (opts.sharedKey ? undefined : keyHash)) === keyHash ? entry : undefined;
  const client = new acme.Client({
    directoryUrl: opts.directoryUrl,
    accountKey,
    ...(cached && cached.email === email ? { accountUrl: cached.url } : {}),
    backoffMin: poll.minMs,
    backoffMax: poll.maxMs,
    backoffAttempts: poll.attempts,
  });
  if (cached && cached.email === email) return { ok: true, value: { client, url: cached.url, directoryUrl: opts.directoryUrl } };

  let url: string;
  try {
    await client.createAccount({ termsOfServiceAgreed: true, ...(email ? { contact: [`mailto:${email}`] } : {}) });
    url = client.getAccountUrl();
  } catch (err) {
    return { ok: false, error: failureOf(err, "ACCOUNT_REFUSED", clock.now()) };
  }
  try {
    writePrivateFile(join(dir, ACCOUNT_CACHE_FILE), JSON.stringify({ ...cache, [opts.directoryUrl]: { url, email, key: keyHash } }, null, 2) + "\n");
  } catch {
    // the account works; only the next start pays one more request
  }
  return { ok: true, value: { client, url, directoryUrl: opts.directoryUrl } };
}

async function loadOrCreateKey(path: string): Promise<string> {
  if (existsSync(path)) {
    const pem = readFileSync(path, "utf8");
    // a key that does not parse is left alone for the operator to look at, not replaced
    acme.crypto.getPublicKey(pem);
    return pem;
  }
  const pem = await newKey();
  writePrivateFile(path, pem);
  return pem;
}

const newKey = async () => (await acme.crypto.createPrivateEcdsaKey("P-256")).toString();

/** The cache, or an empty one when it is missing or unreadable (it is only a cache). */
function readCache(path: string): AccountCache {
  if (!existsSync(path)) return {};
  try {
    const parsed = JSON.parse(readFileSync(path, "utf8")) as unknown;
    if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) return {};
    const cache: AccountCache = {};
    for (const [dir, v] of Object.entries(parsed as Record<string, unknown>)) {
      const entry = v as Partial<CachedAccount> | null;
      if (entry && typeof entry.url === "string") {
        cache[dir] = { url: entry.url, email: typeof entry.email === "string" ? entry.email : null, ...(typeof entry.key === "string" ? { key: entry.key } : {}) };
      }
    }
    return cache;
  } catch {
    return {};
  }
}
