/**
 * The admission hook (--admission-hook): before an agent's tunnels go
 * live, after burrow's own rules admitted them, the server asks a script
 * of the operator's: a POST signed as webhooks are (Standard Webhooks,
 * with BURROW_ADMISSION_HOOK_SECRET), saying who asks for what. A 2xx
 * answering `{"allow": true}` admits; `{"allow": false, "code", "message"}`
 * refuses with ADMISSION_REFUSED and that code and message. Anything else
 * (no answer within --admission-hook-timeout, an error, another status,
 * a body that is not that, a destination refused) refuses with
 * ADMISSION_UNAVAILABLE, which the agent waits out, unless the server
 * runs with --admission-hook-fail-open, which admits then and logs why.
 */
import * as v from "valibot";
import { AppError } from "../core/errors.ts";
import { signedHeaders } from "../core/events/signing.ts";
import { randomBase62 } from "../core/secrets.ts";
import { log, quietWarnings } from "../log.ts";
import { postSigned, type PostLimits } from "./post.ts";

export interface AdmissionHookSettings {
  url: string;
  secret: string;
  failOpen: boolean;
  timeoutMs: number;
  /** --webhook-allow-private and --webhook-max-response, as for webhooks. */
  allowPrivate: boolean;
  maxResponseBytes: number;
}

/** What the hook is asked about: a handshake that burrow's rules admitted. */
export interface AdmissionAsk {
  user_id: number;
  username: string;
  /** The device: its token, or null and the SSH key of an `ssh -R` session. */
  token_id: number | null;
  ssh_key_id: number | null;
  device_name: string;
  /** The agent's address (behind a trusted proxy, the client it names). */
  address: string;
  tunnels: { kind: string; name: string | null; hostname: string | null; port: number | null; private: boolean }[];
}

/** Asks the hook; resolves to undefined (admitted) or the refusal to send the agent. Never rejects. */
export type AdmissionHook = (ask: AdmissionAsk) => Promise<AppError | undefined>;

const Answer = v.object({
  allow: v.boolean(),
  code: v.optional(v.pipe(v.string(), v.regex(/^[A-Za-z0-9_]{1,64}$/))),
  message: v.optional(v.pipe(v.string(), v.maxLength(500))),
});

export function admissionHook(settings: AdmissionHookSettings, post: typeof postSigned = postSigned): AdmissionHook {
  const limits: PostLimits = { timeoutMs: settings.timeoutMs, maxResponseBytes: settings.maxResponseBytes, allowPrivate: settings.allowPrivate };
  const warn = quietWarnings(10_000);
  const unavailable = (why: string): AppError | undefined => {
    if (settings.failOpen) {
      warn("admission", "admission hook failed: admitted (--admission-hook-fail-open)", { why });
      return undefined;
    }
    warn("admission", "admission hook failed: refused", { why });
    // the why stays in the server's log: it may name the operator's own network
    return new AppError("ADMISSION_UNAVAILABLE", "the server's admission hook could not be asked (no answer in time, a failure, or an answer that is neither allow nor refuse): try again later");
  };
  return async (ask) => {
    const id = `adm_${randomBase62(20)}`;
    const now = Date.now();
    const body = JSON.stringify({ id, type: "admission.request", timestamp: new Date(now).toISOString(), data: ask });
    const result = await post(settings.url, body, signedHeaders([settings.secret], id, Math.floor(now / 1000), body), limits, { wantBody: true });
    if (!result.ok) return unavailable(result.error ?? "failed");
    let parsed: unknown;
    try {
      parsed = JSON.parse(result.body ?? "");
    } catch {
      return unavailable("its answer is not JSON");
    }
    const answer = v.safeParse(Answer, parsed);
    if (!answer.success) return unavailable('its answer is not {"allow": true|false, "code"?, "message"?}');
    if (answer.output.allow) return undefined;
    const code = answer.output.code ?? "REFUSED";
    const message = (answer.output.message ?? "refused by the server's admission hook").replace(/[\x00-\x1f\x7f]/g, " ");
    log.info("admission hook refused a handshake", { user: ask.username, token: ask.token_id, code });
    return new AppError("ADMISSION_REFUSED", `${code}: ${message}`);
  };
}
