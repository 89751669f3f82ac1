// @ts-check
// TEST ONLY, never packed: the mode a sabotage entry point (sink.mjs, coordinator.mjs) runs in.
// No imports, so a missing or unknown mode is refused before any daemon code is loaded.

/** The one variable the sabotage entry points read (the daemons' own config never sees it). */
export const SABOTAGE_ENV = 'LEASEHOLD_TEST_SABOTAGE';

/**
 * The mode named by LEASEHOLD_TEST_SABOTAGE, removed from `env`; exits 2 with a clear line when it
 * is missing or not one of `modes` (an entry point never starts its daemon unsabotaged by mistake).
 *
 * @template {string} M
 * @param {string} daemon
 * @param {readonly M[]} modes
 * @param {NodeJS.ProcessEnv} env
 * @returns {M}
 */
export function takeSabotage(daemon, modes, env) {
  const mode = env[SABOTAGE_ENV];
  delete env[SABOTAGE_ENV];
  const known = /** @type {readonly string[]} */ (modes);
  if (mode === undefined || !known.includes(mode)) {
    process.stderr.write(
      `${daemon} (sabotage entry point): ${SABOTAGE_ENV} must be one of ${modes.join(', ')} (got ${mode ?? 'nothing'})\n`,
    );
    process.exit(2);
  }
  return /** @type {M} */ (mode);
}
