/**
 * A tunnel's access settings judged on the server, as the refusal the edge
 * sends (an AppError with its code); what each setting must look like is
 * in validate/access.ts, shared with the agent.
 */
import type { HttpAccess, TcpAccess } from "../protocol/messages.ts";
import { basicAuthProblem, cidrProblem, emailRuleProblem, headerProblem, issuerProblem } from "../validate/access.ts";
import { AppError } from "./errors.ts";

/** The first thing wrong with a tunnel's access settings, as the refusal the edge sends. */
export function checkAccess(access: HttpAccess | TcpAccess | undefined): AppError | undefined {
  if (!access) return undefined;
  for (const list of [access.allowCidrs, access.denyCidrs]) {
    for (const c of list ?? []) {
      const p = cidrProblem(c);
      if (p) return new AppError("CIDR_INVALID", p);
    }
  }
  if (!("basicAuth" in access || "oidc" in access || "requestHeaderAdd" in access || "requestHeaderRemove" in access || "responseHeaderAdd" in access)) {
    return undefined;
  }
  const http = access as HttpAccess;
  for (const cred of http.basicAuth ?? []) {
    const p = basicAuthProblem(cred);
    if (p) return new AppError("BASIC_AUTH_INVALID", p);
  }
  for (const [name, value] of [...(http.requestHeaderAdd ?? []), ...(http.responseHeaderAdd ?? [])]) {
    const p = headerProblem(name, value);
    if (p) return new AppError("HEADER_RULE_INVALID", p);
  }
  for (const name of http.requestHeaderRemove ?? []) {
    const p = headerProblem(name);
    if (p) return new AppError("HEADER_RULE_INVALID", p);
  }
  const oidc = http.oidc;
  if (oidc) {
    if ((http.basicAuth?.length ?? 0) > 0) return new AppError("OIDC_INVALID", "a tunnel takes basic auth or OIDC, not both");
    const p =
      issuerProblem(oidc.issuer) ??
      (oidc.clientId === "" ? "the OIDC client id is empty" : undefined) ??
      (oidc.clientSecret === "" ? "the OIDC client secret is empty" : undefined) ??
      (oidc.allowEmails ?? []).map(emailRuleProblem).find((x) => x !== undefined);
    if (p) return new AppError("OIDC_INVALID", p);
  }
  return undefined;
}
