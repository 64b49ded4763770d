/**
 * basic-auth: the visitor must send one of `credentials` ("user:password")
 * in `Authorization: Basic` (RFC 7617), or is answered 401 with the
 * browser's prompt. As today's --basic-auth: only SHA-256 digests of the
 * pairs are kept, a visitor's pair is compared with every one in constant
 * time, wrong passwords are counted per address (IPv6: per /64) and past
 * the server's --basic-auth-limit the address is answered 429 unheard for
 * a minute, doubling to 15; the password goes no further than the edge
 * (Authorization is taken off the forwarded request). ngrok wants
 * passwords of 8 characters or more; burrow takes what --basic-auth takes.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import * as v from "valibot";
import { Throttle, type ThrottleRules } from "../../core/throttle.ts";
import { clientKey } from "../../http/addresses.ts";
import { basicAuthProblem } from "../../validate/access.ts";
import type { Template } from "../cel/template.ts";
import { flag, render } from "./common.ts";
import { defineAction, textResponse } from "./types.ts";

const MAX_CREDENTIALS = 10;

/** The same rules as the edge's basic auth today (edge/access/basic-auth.ts), but for the allowance, the server's --basic-auth-limit. */
const GUESSES: Omit<ThrottleRules, "allowance"> = { forgetAfterMs: 15 * 60_000, firstLockMs: 60_000, maxLockMs: 15 * 60_000, maxKeys: 4096 };

const digest = (text: string) => createHash("sha256").update(text, "utf8").digest();

/** Whether `presented` is one of `digests`, every one compared in constant time, none skipped. */
function matchesAny(presented: string, digests: readonly Buffer[]): boolean {
  const mine = digest(presented);
  let found = false;
  for (const d of digests) found = timingSafeEqual(mine, d) || found;
  return found;
}

/** "user:password" split at the first colon, or why it is not a credential (never quoting it). */
function splitCredential(text: string): { user: string; password: string } | string {
  const colon = text.indexOf(":");
  if (colon < 0) return "a credential is USER:PASSWORD, with a colon";
  const pair = { user: text.slice(0, colon), password: text.slice(colon + 1) };
  return basicAuthProblem(pair) ?? pair;
}

/** The pair in an Authorization header, or undefined. */
function presented(authorization: string | undefined): { pair: string; user: string } | undefined {
  if (!authorization) return undefined;
  const m = /^basic[ \t]+([A-Za-z0-9+/=]{1,8192})[ \t]*$/i.exec(authorization);
  if (!m) return undefined;
  const pair = Buffer.from(m[1]!, "base64").toString("utf8");
  const colon = pair.indexOf(":");
  return colon < 0 ? undefined : { pair, user: pair.slice(0, colon) };
}

export const basicAuth = defineAction({
  type: "basic-auth",
  phases: ["on_http_request"],
  schema: v.strictObject({
    credentials: v.pipe(v.array(v.string()), v.minLength(1), v.maxLength(MAX_CREDENTIALS)),
    realm: v.optional(v.pipe(v.string(), v.maxLength(128), v.regex(/^[\x20-\x7e]*$/, "the realm must be printable ASCII"))),
    enforce: flag,
  }),
  compile(config, tools) {
    const fixed: Buffer[] = [];
    const templated: Template[] = [];
    config.credentials.forEach((text, i) => {
      const t = tools.template(text, ["credentials", i]);
      if (!t) return;
      if (t.constant === undefined) return void templated.push(t);
      const pair = splitCredential(t.constant);
      if (typeof pair === "string") tools.error(["credentials", i], pair);
      else fixed.push(digest(`${pair.user}:${pair.password}`));
    });
    let guesses: Throttle | undefined;
    return {
      type: "basic-auth",
      run(ctx) {
        guesses ??= new Throttle({ ...GUESSES, allowance: ctx.services.basicAuthLimit }, ctx.services.now);
        const req = ctx.bindings.req();
        const given = presented(req.header("authorization"));
        const digests = [...fixed];
        for (const t of templated) {
          const text = render(t, ctx, "a credential");
          const pair = text === undefined ? "a credential did not evaluate" : splitCredential(text);
          if (typeof pair === "string") ctx.problem(`basic-auth: ${pair}`);
          else digests.push(digest(`${pair.user}:${pair.password}`));
        }
        const client = ctx.bindings.input.conn.clientIp;
        // a request without credentials is not a guess (a browser's first request); a wrong one counts
        // a visit judged again is checked for what it carries, and counts no guess (it made none)
        const verdict = ctx.bindings.input.rejudging
          ? { passed: given !== undefined && matchesAny(given.pair, digests), retryAt: undefined }
          : guesses.judgeNow(clientKey(client), () => (req.header("authorization") === undefined ? undefined : given !== undefined && matchesAny(given.pair, digests)));
        const authorized = verdict.passed === true;
        ctx.setVariables("basic_auth", { credentials: { presented: given !== undefined, username: authorized ? given!.user : "", authorized } });
        if (authorized) {
          ctx.bindings.identity = given!.user;
          // the tunnel's own password goes no further than the edge
          for (let i = req.headers.length - 1; i >= 0; i--) if (req.headers[i]![0].toLowerCase() === "authorization") req.headers.splice(i, 1);
          ctx.bindings.changed();
          return { kind: "continue", note: `signed in as ${given!.user}` };
        }
        if (!config.enforce) return { kind: "continue", note: "not signed in (not enforced)" };
        if (verdict.retryAt !== undefined) {
          const retry = String(Math.max(1, Math.ceil((verdict.retryAt - ctx.services.now()) / 1000)));
          return { kind: "respond", response: textResponse(429, "Too many wrong passwords from your address.\n", [["retry-after", retry]]), note: "locked: too many wrong passwords" };
        }
        const realm = (config.realm ?? ctx.bindings.input.tunnel.name).replace(/["\\]/g, "");
        return {
          kind: "respond",
          response: textResponse(401, "Sign-in required.\n", [["www-authenticate", `Basic realm="${realm}", charset="UTF-8"`]]),
          note: given ? "wrong user or password" : "no credentials",
        };
      },
    };
  },
});
