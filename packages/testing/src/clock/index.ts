// `@leasehold/testing/clock`: manual time alone (no coordinator is loaded).
export { ManualClock } from './manual-clock.js';
export { ManualTimers } from './manual-timers.js';
