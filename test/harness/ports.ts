/** Free loopback ports: moved to @leasehold/devkit (kept here for older imports). */
export { freePort, freePorts } from '@leasehold/devkit';
