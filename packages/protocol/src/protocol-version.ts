/** Version of the worker <-> coordinator protocol. Bumped on any incompatible change. */
export const PROTOCOL_VERSION = 1;
/** Oldest protocol version a peer of this build still accepts. */
export const MIN_PROTOCOL_VERSION = 1;

export function isCompatibleProtocolVersion(version: number): boolean {
  return Number.isInteger(version) && version >= MIN_PROTOCOL_VERSION && version <= PROTOCOL_VERSION;
}
