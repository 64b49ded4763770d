/**
 * The jwt-validation action tests write again and again: a bearer access
 * token in Authorization, checked against `issuer` (its key set at
 * `${issuer}/jwks`) for the audience `urn:api`, as YAML at the depth of
 * a rule's action list (`  - actions:` above it).
 */
export function jwtValidation(issuer: string, algorithms = "RS256"): string {
  return `      - type: jwt-validation
        config:
          issuer: { allow_list: [{ value: "${issuer}" }] }
          audience: { allow_list: [{ value: "urn:api" }] }
          http:
            tokens: [{ type: access_token, method: header, name: Authorization, prefix: "Bearer " }]
          jws:
            allowed_algorithms: [${algorithms}]
            keys: { sources: { additional_jkus: ["${issuer}/jwks"] } }
`;
}
