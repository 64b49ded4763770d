/**
 * jwt-validation: every token `http.tokens` names must be on the request
 * (a header, with its prefix such as "Bearer "; a field of a JSON or form
 * body; or, burrow's own, a cookie), signed by a key of the JWKS URLs with
 * one of `allowed_algorithms`, issued by one of `issuer.allow_list`, for one
 * of `audience.allow_list` when there is one, and in date. Else 401 with
 * `WWW-Authenticate: Bearer error="invalid_token"`. Signatures and claims
 * are jose's; the key sets are fetched with jose's createRemoteJWKSet and
 * cached (services.ts: 15 minutes, a missing `kid` refetched at most every
 * 30 s). JWKS URLs are constant (no `${...}`: a request must not choose
 * where the server fetches from) and https, or http on loopback when the
 * server allows loopback issuers.
 */
import * as v from "valibot";
import { decodeProtectedHeader, errors, jwtVerify, type JWTPayload } from "jose";
import { providerEndpointProblem } from "../../validate/access.ts";
import type { Template } from "../cel/template.ts";
import type { WorkingRequest } from "../message.ts";
import { render } from "./common.ts";
import { defineAction, textResponse, type ActionContext } from "./types.ts";

/** Asymmetric algorithms only: a JWKS of public keys cannot check an HMAC, and `none` is no signature. */
const ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA", "Ed25519"] as const;

const allowList = v.strictObject({ allow_list: v.pipe(v.array(v.strictObject({ value: v.string() })), v.minLength(1), v.maxLength(32)) });

const schema = v.strictObject({
  issuer: allowList,
  audience: v.optional(allowList),
  http: v.strictObject({
    tokens: v.pipe(
      v.array(
        v.strictObject({
          type: v.picklist(["id_token", "access_token", "at+jwt", "it+jwt", "plain", "jwt"]),
          method: v.picklist(["header", "body", "cookie"]),
          name: v.pipe(v.string(), v.minLength(1)),
          prefix: v.optional(v.string()),
        }),
      ),
      v.minLength(1),
      v.maxLength(8),
    ),
  }),
  jws: v.strictObject({
    allowed_algorithms: v.pipe(v.array(v.string()), v.minLength(1)),
    keys: v.strictObject({
      sources: v.strictObject({ additional_jkus: v.pipe(v.array(v.string()), v.minLength(1), v.maxLength(8)) }),
      identification: v.optional(v.unknown()),
    }),
  }),
});

interface TokenPlace {
  method: "header" | "body" | "cookie";
  name: Template;
  prefix?: Template;
}

/** A body field (JSON object or form), for method: body. */
function bodyField(req: WorkingRequest, name: string): string | undefined {
  // the edge hands over a body up to its limit (--policy-body-limit); a larger one is none here
  if (!req.body) return undefined;
  const text = Buffer.from(req.body).toString("utf8");
  const type = (req.header("content-type") ?? "").toLowerCase();
  if (type.startsWith("application/json")) {
    try {
      const value = (JSON.parse(text) as Record<string, unknown>)[name];
      return typeof value === "string" ? value : undefined;
    } catch {
      return undefined;
    }
  }
  if (type.startsWith("application/x-www-form-urlencoded")) return new URLSearchParams(text).get(name) ?? undefined;
  return undefined;
}

function findToken(place: TokenPlace, ctx: ActionContext): { token?: string; where: string } {
  const name = render(place.name, ctx, "token name") ?? "";
  const prefix = place.prefix ? (render(place.prefix, ctx, "token prefix") ?? "") : "";
  const req = ctx.bindings.req();
  let raw: string | undefined;
  if (place.method === "header") raw = req.header(name);
  else if (place.method === "cookie") raw = ctx.bindings.cookie(name)?.value;
  else raw = bodyField(req, name);
  if (raw === undefined) return { where: `${place.method} ${name}` };
  // the prefix as ngrok matches it: "Bearer " in any case
  if (prefix !== "" && raw.slice(0, prefix.length).toLowerCase() !== prefix.toLowerCase()) return { where: `${place.method} ${name}` };
  return { token: raw.slice(prefix.length).trim(), where: `${place.method} ${name}` };
}

/** Why jose refused a token, in a few words (never the token). */
function refusal(err: unknown): string {
  if (err instanceof errors.JWTExpired) return "the token has expired";
  if (err instanceof errors.JWTClaimValidationFailed) return `its ${err.claim} claim is not one allowed`;
  if (err instanceof errors.JWSSignatureVerificationFailed) return "its signature does not verify";
  if (err instanceof errors.JWKSNoMatchingKey) return "no key of the key set matches it";
  if (err instanceof errors.JOSEAlgNotAllowed) return "its algorithm is not allowed";
  if (err instanceof errors.JWKSTimeout) return "the key set did not answer in time";
  if (err instanceof errors.JWTInvalid || err instanceof errors.JWSInvalid) return "it is not a well-formed JWT";
  return err instanceof Error ? err.message : "it does not verify";
}

export const jwtValidation = defineAction({
  type: "jwt-validation",
  phases: ["on_http_request"],
  schema,
  compile(config, tools) {
    config.jws.allowed_algorithms.forEach((alg, i) => {
      if (!(ALGORITHMS as readonly string[]).includes(alg)) tools.error(["jws", "allowed_algorithms", i], `'${alg}' is not an algorithm burrow checks with a key set (${ALGORITHMS.join(", ")})`);
    });
    const jkus = config.jws.keys.sources.additional_jkus;
    jkus.forEach((url, i) => {
      const at = ["jws", "keys", "sources", "additional_jkus", i];
      if (url.includes("${")) tools.error(at, "a JWKS URL is written out: no ${...}, a request must not choose where the server fetches from");
      // https, or plain http on loopback (taken when the server allows loopback issuers: checked as it runs)
      else if (providerEndpointProblem("JWKS URL", url, true)) tools.error(at, `'${url}' is not an https URL (plain http only on loopback)`);
    });
    const issuers = config.issuer.allow_list.map((e, i) => tools.template(e.value, ["issuer", "allow_list", i, "value"]));
    const audiences = (config.audience?.allow_list ?? []).map((e) => e.value);
    const places = config.http.tokens.map((t, i): TokenPlace | undefined => {
      const name = tools.template(t.name, ["http", "tokens", i, "name"]);
      const prefix = t.prefix === undefined ? undefined : tools.template(t.prefix, ["http", "tokens", i, "prefix"]);
      return name ? { method: t.method, name, prefix } : undefined;
    });
    if (issuers.some((i) => !i) || places.some((p) => !p)) return undefined;
    const algorithms = config.jws.allowed_algorithms;
    const readsBody = config.http.tokens.some((t) => t.method === "body");
    return {
      type: "jwt-validation",
      readsBody,
      async run(ctx) {
        for (const [i, url] of jkus.entries()) {
          const problem = providerEndpointProblem("JWKS URL", url, ctx.services.httpLoopback);
          if (problem) {
            ctx.problem(`jwt-validation: additional_jkus[${i}]: ${problem}`);
            return deny("the key set's URL is not allowed");
          }
        }
        const issuer = issuers.map((t) => render(t!, ctx, "issuer")).filter((s): s is string => s !== undefined);
        const tokens: Record<string, unknown>[] = [];
        let identity: string | undefined;
        for (const place of places) {
          const { token, where } = findToken(place!, ctx);
          if (!token) {
            ctx.setVariables("jwt_validation", { tokens, error: { code: "TOKEN_MISSING", message: `no token in the ${where}` } });
            return deny(`no token in the ${where}`);
          }
          const verified = await verify(token, jkus, ctx, { issuer, audience: audiences.length ? audiences : undefined, algorithms, currentDate: new Date(ctx.services.now()) });
          tokens.push({ header: safeHeader(token), payload: verified.payload ?? {}, location: place!.method, location_property: where.slice(where.indexOf(" ") + 1), verified: verified.payload !== undefined });
          if (!verified.payload) {
            ctx.setVariables("jwt_validation", { tokens, error: { code: "TOKEN_INVALID", message: verified.why } });
            return deny(verified.why!);
          }
          identity ??= typeof verified.payload.sub === "string" ? verified.payload.sub : undefined;
        }
        ctx.setVariables("jwt_validation", { tokens });
        if (identity !== undefined) ctx.bindings.identity = identity;
        ctx.bindings.changed();
        return { kind: "continue", note: `token verified${identity !== undefined ? ` (sub ${identity})` : ""}` };
      },
    };
  },
});

async function verify(
  token: string,
  jkus: readonly string[],
  ctx: ActionContext,
  options: { issuer: string[]; audience?: string[]; algorithms: string[]; currentDate: Date },
): Promise<{ payload?: JWTPayload; why?: string }> {
  let why = "it does not verify";
  // each key set in order, as ngrok tries them; the first that verifies wins
  for (const url of jkus) {
    try {
      const { payload } = await jwtVerify(token, ctx.services.keySets.get(url), options);
      return { payload };
    } catch (err) {
      why = refusal(err);
      if (!(err instanceof errors.JWKSNoMatchingKey) && !(err instanceof errors.JWSSignatureVerificationFailed)) break;
    }
  }
  return { why };
}

function safeHeader(token: string): Record<string, unknown> {
  try {
    return decodeProtectedHeader(token) as Record<string, unknown>;
  } catch {
    return {};
  }
}

function deny(why: string) {
  return {
    kind: "respond" as const,
    response: textResponse(401, "Unauthorized: a valid token is required.\n", [["www-authenticate", 'Bearer error="invalid_token"']]),
    note: why,
  };
}
