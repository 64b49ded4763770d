/**
 * The device's half of logging in through the browser (RFC 8628; the
 * paths and answers are protocol/wire.ts's): ask for codes, let the person
 * see them, poll until the token comes or the answer is no. The caller
 * shows the codes and saves the token; this only talks to the server.
 */
import { DEVICE_CODE_PATH, DEVICE_TOKEN_PATH } from "../protocol/wire.ts";

export interface DeviceCodes {
  deviceCode: string;
  userCode: string;
  verificationUri: string;
  verificationUriComplete: string;
  expiresInS: number;
  intervalS: number;
}

export interface DeviceToken {
  token: string;
  tokenId: number;
  username: string;
}

/** Why the login ended without a token, in words for the person at the terminal. */
export class DeviceLoginError extends Error {
  constructor(
    readonly reason: "no_portal" | "access_denied" | "expired_token" | "invalid_grant" | "refused" | "unreachable",
    message: string,
  ) {
    super(message);
    this.name = "DeviceLoginError";
  }
}

/** Seconds a poll that failed on the network waits before the next, at most. */
const MAX_NETWORK_BACKOFF_S = 30;
/** Each request gives up after this long (a server that accepts and never answers). */
const REQUEST_TIMEOUT_MS = 15_000;

const httpBase = (server: string) => server.replace(/^ws(s?):\/\//, "http$1://").replace(/\/+$/, "");

async function post(server: string, path: string, body: unknown): Promise<{ status: number; json: Record<string, unknown> | undefined }> {
  const res = await fetch(`${httpBase(server)}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json" },
    body: JSON.stringify(body),
    redirect: "error",
    signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
  });
  const text = await res.text();
  let json: Record<string, unknown> | undefined;
  try {
    const parsed: unknown = JSON.parse(text);
    json = typeof parsed === "object" && parsed !== null && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : undefined;
  } catch {
    json = undefined;
  }
  return { status: res.status, json };
}

const str = (v: unknown) => (typeof v === "string" ? v : undefined);
const posInt = (v: unknown) => (typeof v === "number" && Number.isSafeInteger(v) && v > 0 ? v : undefined);

/** Asks the server for codes; a server without the portal says so by a 404. */
export async function requestDeviceCodes(server: string, deviceName: string): Promise<DeviceCodes> {
  let answer;
  try {
    answer = await post(server, DEVICE_CODE_PATH, { device_name: deviceName });
  } catch (err) {
    throw new DeviceLoginError("unreachable", `cannot reach ${server}: ${(err as Error).message}`);
  }
  const { status, json } = answer;
  if (status === 404 || status === 405) {
    throw new DeviceLoginError("no_portal", `${server} does not offer login through the browser (its portal is off, or it is older): ask its admin for a token and run burrow login --server ${server} --token brw_...`);
  }
  if (status !== 200 || !json) {
    const why = str(json?.error) ?? `HTTP ${status}`;
    throw new DeviceLoginError("refused", `${server} refused to start a login: ${why}`);
  }
  const codes = {
    deviceCode: str(json.device_code),
    userCode: str(json.user_code),
    verificationUri: str(json.verification_uri),
    verificationUriComplete: str(json.verification_uri_complete) ?? str(json.verification_uri),
    expiresInS: posInt(json.expires_in),
    intervalS: posInt(json.interval) ?? 5,
  };
  if (!codes.deviceCode || !codes.userCode || !codes.verificationUri || !codes.expiresInS) {
    throw new DeviceLoginError("refused", `${server} answered the login's start without the codes it needs`);
  }
  return codes as DeviceCodes;
}

export interface PollOptions {
  signal?: AbortSignal;
  /** Told when the server asks to poll more slowly, or the network failed once (the wait goes on). */
  onWait?(why: "slow_down" | "network", nextS: number): void;
  /** The clock and sleep, for tests; real ones by default. */
  sleep?(ms: number, signal?: AbortSignal): Promise<void>;
  now?(): number;
}

const realSleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", abort);
      resolve();
    }, ms);
    const abort = () => {
      clearTimeout(t);
      reject(signal!.reason);
    };
    signal?.addEventListener("abort", abort, { once: true });
  });

/** Polls until the token comes (RFC 8628 §3.4-3.5), the user says no, or the codes expire. */
export async function pollForToken(server: string, codes: DeviceCodes, options: PollOptions = {}): Promise<DeviceToken> {
  const sleep = options.sleep ?? realSleep;
  const now = options.now ?? Date.now;
  const deadline = now() + codes.expiresInS * 1000;
  let intervalS = codes.intervalS;
  let backoffS = intervalS;
  for (;;) {
    if (now() >= deadline) throw new DeviceLoginError("expired_token", "the code expired before it was approved: run burrow login again");
    await sleep(intervalS * 1000, options.signal);
    let answer;
    try {
      answer = await post(server, DEVICE_TOKEN_PATH, { device_code: codes.deviceCode });
    } catch (err) {
      if (options.signal?.aborted) throw err;
      // the network is the device's or the server's, for a moment: wait longer, up to the code's life
      backoffS = Math.min(backoffS * 2, MAX_NETWORK_BACKOFF_S);
      options.onWait?.("network", backoffS);
      await sleep(Math.max(0, backoffS - intervalS) * 1000, options.signal);
      continue;
    }
    backoffS = intervalS;
    const { status, json } = answer;
    if (status === 200 && json) {
      const token = str(json.token);
      const tokenId = posInt(json.token_id);
      const username = str(json.username);
      if (token && tokenId && username) return { token, tokenId, username };
      throw new DeviceLoginError("refused", `${server} approved the login but sent no token`);
    }
    const error = str(json?.error);
    const description = str(json?.error_description);
    if (error === "authorization_pending") continue;
    if (error === "slow_down") {
      intervalS += 5;
      options.onWait?.("slow_down", intervalS);
      continue;
    }
    if (error === "access_denied") throw new DeviceLoginError("access_denied", `the login was denied${description ? `: ${description}` : ""}`);
    if (error === "expired_token") throw new DeviceLoginError("expired_token", "the code expired before it was approved: run burrow login again");
    if (error === "invalid_grant") throw new DeviceLoginError("invalid_grant", `${server} no longer knows this login: run burrow login again`);
    if (status === 429 || status >= 500) {
      backoffS = Math.min(backoffS * 2, MAX_NETWORK_BACKOFF_S);
      options.onWait?.("network", backoffS);
      await sleep(Math.max(0, backoffS - intervalS) * 1000, options.signal);
      continue;
    }
    throw new DeviceLoginError("refused", `${server} refused the login: ${error ?? `HTTP ${status}`}${description ? ` (${description})` : ""}`);
  }
}
