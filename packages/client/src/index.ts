// The public surface of @leasehold/client. Named exports only.
export { LeaseholdClient } from './client.js';
export type { LeaseholdClientOptions, SubmitOutcome, ListOptions } from './client.js';
export type { TaskView, TaskPage, ResourceOwnerView, SubmitTaskRequest, TaskStateName } from '@leasehold/protocol';
