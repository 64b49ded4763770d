/** Every action burrow has, by ngrok's type name: what a policy document may name. */
import { addHeaders } from "./add-headers.ts";
import { basicAuth } from "./basic-auth.ts";
import { circuitBreaker } from "./circuit-breaker.ts";
import { closeConnection } from "./close-connection.ts";
import { compressResponse } from "./compress-response.ts";
import { customResponse } from "./custom-response.ts";
import { deny } from "./deny.ts";
import { httpRequest } from "./http-request.ts";
import { jwtValidation } from "./jwt-validation.ts";
import { log } from "./log.ts";
import { openidConnect } from "./openid-connect.ts";
import { rateLimit } from "./rate-limit.ts";
import { redirect } from "./redirect.ts";
import { removeHeaders } from "./remove-headers.ts";
import { requestBodyFindReplace } from "./request-body-find-replace.ts";
import { responseBodyFindReplace } from "./response-body-find-replace.ts";
import { restrictIps } from "./restrict-ips.ts";
import { setVars } from "./set-vars.ts";
import { sseFindReplace } from "./sse-find-replace.ts";
import type { ActionDefinition } from "./types.ts";
import { urlRewrite } from "./url-rewrite.ts";
import { verifyWebhook } from "./verify-webhook.ts";

export const ACTIONS: ReadonlyMap<string, ActionDefinition> = new Map(
  [addHeaders, basicAuth, circuitBreaker, closeConnection, compressResponse, customResponse, deny, httpRequest, jwtValidation, log, openidConnect, rateLimit, redirect, removeHeaders, requestBodyFindReplace, responseBodyFindReplace, restrictIps, setVars, sseFindReplace, urlRewrite, verifyWebhook].map((a) => [a.type, a]),
);

/** ngrok's actions burrow does not have, with why: said when a policy names one. */
export const NOT_IN_BURROW: Readonly<Record<string, string>> = {
  "forward-internal": "burrow has no internal endpoints: a tunnel forwards to its agent",
  oauth: "use openid-connect with your provider",
  saml: "not in burrow",
  "owasp-crs-request": "not in burrow",
  "owasp-crs-response": "not in burrow",
  "terminate-tls": "TLS is terminated by the edge's own certificates (or passed through by tls tunnels)",
  "ai-gateway": "not in burrow",
};
