/**
 * How burrow's ACME client talks HTTPS to the CA. acme-client sends every
 * request through one axios instance for the whole process (every Client
 * shares it), so this is set once, at start, for all of them:
 *
 * - Trust: `--acme-ca-root FILE` adds a CA to the system's roots for the
 *   directory's HTTPS (a test CA such as Pebble; Let's Encrypt needs none).
 *   An https.Agent with `ca` is what axios's Node adapter honours, and Bun's
 *   node:https honours it too.
 * - Retries: acme-client's own response interceptor retries 5xx, 429 and
 *   network errors, but once its retries are spent on an error without a
 *   response it reads `response.config` of undefined and throws a TypeError
 *   that hides the cause (acme-client 5.4.0, publishlab/node-acme-client#101).
 *   It is replaced by the one below: a few quick retries of 5xx and network
 *   faults, then the original error (with its code: ECONNREFUSED, a TLS
 *   verify error) or a CA_ERROR once they are spent, and a 429 surfaced at
 *   once with its Retry-After instead of being slept on inside a request;
 *   the renewal schedule (renewal.ts) decides when to come back.
 */
import { X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";
import https from "node:https";
import tls from "node:tls";
import * as acme from "acme-client";
import type { AxiosError, AxiosResponse, InternalAxiosRequestConfig } from "axios";
import { AcmeStepError, type AcmeResult } from "./errors.ts";

/** One request to the CA, at most (connect, TLS, answer). */
export const REQUEST_TIMEOUT_MS = 30_000;
/** Retries of one request after a 5xx or a network fault, before the error is the attempt's. */
export const REQUEST_RETRIES = 2;
/** The n-th retry waits n times this, unless the CA's Retry-After says otherwise. */
export const RETRY_DELAY_MS = 1_000;
/** A Retry-After longer than this is not slept on inside a request: the attempt fails and is scheduled again. */
export const MAX_IN_REQUEST_WAIT_MS = 10_000;

export interface AcmeHttpOptions {
  /** PEM of a CA (or CAs) trusted, besides the system's, for the directory's HTTPS. */
  caRootPem?: string;
  requestTimeoutMs?: number;
  retries?: number;
  retryDelayMs?: number;
}

type RetriedConfig = InternalAxiosRequestConfig & { retryValidateStatus?: ((status: number) => boolean) | null; burrowRetries?: number };

let settings = { retries: REQUEST_RETRIES, retryDelayMs: RETRY_DELAY_MS };
let interceptorId: number | undefined;

/** Sets how every ACME request of this process is sent. Calling it again replaces what it set. */
export function configureAcmeHttp(opts: AcmeHttpOptions = {}): void {
  const instance = acme.axios;
  settings = { retries: opts.retries ?? REQUEST_RETRIES, retryDelayMs: opts.retryDelayMs ?? RETRY_DELAY_MS };
  instance.defaults.timeout = opts.requestTimeoutMs ?? REQUEST_TIMEOUT_MS;
  instance.defaults.httpsAgent = opts.caRootPem
    ? new https.Agent({ ca: [...tls.rootCertificates, opts.caRootPem], keepAlive: true })
    : new https.Agent({ keepAlive: true });
  if (interceptorId === undefined) {
    // acme-client's own interceptor is the only other one on its instance
    instance.interceptors.response.clear();
    interceptorId = instance.interceptors.response.use(undefined, onError);
  }
}

/** Reads `--acme-ca-root FILE`: one or more PEM certificates, checked to parse. */
export function readCaRoot(path: string): AcmeResult<string> {
  const now = new Date().toISOString();
  let pem: string;
  try {
    pem = readFileSync(path, "utf8");
  } catch (err) {
    return { ok: false, error: { code: "CA_UNTRUSTED", message: `cannot read the ACME CA root ${path}: ${(err as Error).message}`, at: now } };
  }
  const blocks = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  try {
    if (blocks.length === 0) throw new Error("no PEM certificate in it");
    for (const block of blocks) new X509Certificate(block);
  } catch (err) {
    return { ok: false, error: { code: "CA_UNTRUSTED", message: `the ACME CA root ${path} is not a PEM certificate: ${(err as Error).message}`, at: now } };
  }
  return { ok: true, value: blocks.join("\n") + "\n" };
}

/** Seconds, or an HTTP date (RFC 9110 10.2.3); undefined when neither. */
export function parseRetryAfter(header: unknown, now: Date): Date | undefined {
  if (typeof header !== "string" || header.trim() === "") return undefined;
  if (/^\d+$/.test(header.trim())) return new Date(now.getTime() + Number(header.trim()) * 1000);
  const date = Date.parse(header);
  return Number.isNaN(date) ? undefined : new Date(date);
}

function detailOf(response: AxiosResponse): string {
  const data = response.data as { detail?: unknown } | undefined;
  return typeof data?.detail === "string" ? data.detail : `HTTP ${response.status}`;
}

function retryable(error: AxiosError): boolean {
  if (error.response) return error.response.status >= 500;
  // a timeout already waited its whole limit; a TLS refusal will not change
  return error.code !== "ECONNABORTED" && error.code !== "ETIMEDOUT" && !/CERT|SELF_SIGNED|UNABLE_TO/.test(error.code ?? "");
}

async function onError(error: AxiosError): Promise<AxiosResponse> {
  const config = error.config as RetriedConfig | undefined;
  const response = error.response;
  if (!config) throw error;
  if (response?.status === 429) {
    throw new AcmeStepError("RATE_LIMITED", `the ACME CA's rate limit: ${detailOf(response)}`, parseRetryAfter(response.headers["retry-after"], new Date()));
  }
  const attempt = (config.burrowRetries ?? 0) + 1;
  if (retryable(error) && attempt <= settings.retries) {
    const asked = response ? parseRetryAfter(response.headers["retry-after"], new Date()) : undefined;
    const waitMs = asked ? Math.max(0, asked.getTime() - Date.now()) : settings.retryDelayMs * attempt;
    if (waitMs <= MAX_IN_REQUEST_WAIT_MS) {
      await Bun.sleep(waitMs);
      config.burrowRetries = attempt;
      return acme.axios.request(config);
    }
  }
  // no answer at all: the error itself says why (its code), not a TypeError about a missing response
  if (!response) throw error;
  if (response.status >= 500) throw new AcmeStepError("CA_ERROR", `the ACME CA failed: ${detailOf(response)} (${config.method?.toUpperCase()} ${config.url})`);
  const validate = config.retryValidateStatus;
  if (!validate || validate(response.status)) return response;
  throw error;
}
