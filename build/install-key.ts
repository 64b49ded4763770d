/**
 * install.sh with the release's public key written in: the line
 * `BURROW_PUBLIC_KEY=""` of the source's script given the key's base64 (the
 * second line of burrow.pub). The signed release ships this script, which
 * then checks SHA256SUMS.minisig with that key before it installs.
 */
export function withReleaseKey(script: string, publicKeyBase64: string): string {
  if (!/^[A-Za-z0-9+/]{56}$/.test(publicKeyBase64)) throw new Error("not a minisign public key's base64 line");
  const line = 'BURROW_PUBLIC_KEY=""';
  const at = script.indexOf(`\n${line}\n`);
  if (at < 0 || script.indexOf(`\n${line}\n`, at + 1) >= 0) throw new Error(`install.sh must have the line ${line} exactly once`);
  return script.replace(`\n${line}\n`, `\nBURROW_PUBLIC_KEY="${publicKeyBase64}"\n`);
}
