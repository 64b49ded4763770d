/** A device's standing and its last use, whether it is a token or an SSH key (device-ids.ts). */
import { AppError } from "./errors.ts";
import type { Core } from "./index.ts";
import { keyOfDevice } from "./device-ids.ts";

/** Why a device may no longer connect (TOKEN_DISABLED: revoked or gone; KEY_REVOKED: removed), or undefined. */
export async function deviceRefusal(core: Core, deviceId: number): Promise<AppError | undefined> {
  const keyId = keyOfDevice(deviceId);
  try {
    if (keyId !== undefined) {
      await core.sshKeys.get(keyId);
      return undefined;
    }
    const token = await core.tokens.get(deviceId);
    return token.enabled ? undefined : new AppError("TOKEN_DISABLED", "the token was revoked");
  } catch (err) {
    if (!(err instanceof AppError && err.code === "NOT_FOUND")) throw err;
    return keyId !== undefined ? new AppError("KEY_REVOKED", "the SSH key was removed") : new AppError("TOKEN_DISABLED", "the token is gone");
  }
}

/** A device was used (a handshake succeeded): its last_used; `firstUse`, a token never used before: token.first_use too (tokens.ts). */
export function touchDevice(core: Core, deviceId: number, firstUse?: { address: string }): Promise<void> {
  const keyId = keyOfDevice(deviceId);
  return keyId !== undefined ? core.sshKeys.touch(keyId) : core.tokens.touch(deviceId, firstUse);
}
