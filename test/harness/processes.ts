/** Process-group helpers: moved to @leasehold/devkit (kept here for older imports). */
export { signalGroup, stopProcess, track } from '@leasehold/devkit';
