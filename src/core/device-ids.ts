/**
 * A device is what a user connects with: a token (the agent) or an SSH key
 * (the SSH gateway). What is live knows a device by one number, the
 * session's `tokenId`: a token's id as it is, an SSH key's id negated. So
 * everything that counts or follows devices (max_devices, a name held in
 * grace for the device that had it, a revocation closing the device's
 * sessions, the names kept across a restart, the cluster's rows) treats a
 * key as a token without knowing the difference; what must know it asks
 * here (devices.ts: a device's standing and its last use).
 */

/** The device id of SSH key `keyId`. */
export const keyDevice = (keyId: number): number => -keyId;

/** The SSH key a device id is, or undefined for a token's. */
export const keyOfDevice = (deviceId: number): number | undefined => (deviceId < 0 ? -deviceId : undefined);

/**
 * A device as what is shown outside (the admin API, events, the admission
 * hook) names it: `token_id`, or `token_id` null and the key's
 * `ssh_key_id`; never the negated number, which is this process's alone.
 */
export const deviceJson = (deviceId: number): { token_id: number } | { token_id: null; ssh_key_id: number } => {
  const key = keyOfDevice(deviceId);
  return key === undefined ? { token_id: deviceId } : { token_id: null, ssh_key_id: key };
};

/** The same with both fields always there, one of them null: the shape an event or a hook's ask keeps whatever the device. */
export const deviceFields = (deviceId: number | undefined): { token_id: number | null; ssh_key_id: number | null } => ({ token_id: null, ssh_key_id: null, ...(deviceId === undefined ? {} : deviceJson(deviceId)) });
