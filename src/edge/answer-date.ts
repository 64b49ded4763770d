/**
 * The Date of the edge's answer to an agent's question (a GET of
 * CONNECT_PATH), which `burrow diagnose` compares with its own clock.
 *
 * BURROW_TEST_DATE_SKEW_S, for tests only, moves that one header by so many
 * seconds (at most a day either way), so the clock check can be tried
 * against a server whose clock is off. Nothing else reads it: no other
 * answer's Date, no expiry, no rule the server judges by.
 */
const MAX_SKEW_S = 86_400;

function skewMs(raw: string | undefined): number {
  const s = Number(raw);
  return raw !== undefined && Number.isInteger(s) && Math.abs(s) <= MAX_SKEW_S ? s * 1000 : 0;
}

const SKEW_MS = skewMs(process.env.BURROW_TEST_DATE_SKEW_S);

export const answerDate = (now = Date.now()) => new Date(now + SKEW_MS).toUTCString();
