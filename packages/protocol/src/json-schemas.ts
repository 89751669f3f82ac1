/** JSON Schemas of the wire messages, generated from the zod schemas (`pnpm schemas` writes them to schemas/). */
import { z } from 'zod';
import { CoordinatorMessageSchema, WorkerMessageSchema } from './messages/worker-protocol.js';
import {
  AdvanceBatchRequestSchema,
  AdvanceBatchResponseSchema,
  AdvanceRequestSchema,
  AdvanceResponseSchema,
  DecisionPageSchema,
  ProbeRequestSchema,
  ProbeResponseSchema,
  ResourceViewSchema,
  SinkEventSchema,
  StoredResultSchema,
  WriteRequestSchema,
  WriteBatchRequestSchema,
  WriteBatchResponseSchema,
  WriteResponseSchema,
} from './messages/sink.js';
import { ErrorMessageSchema } from './messages/common.js';
import {
  CoordinatorEventSchema,
  PurgeTasksRequestSchema,
  PurgeTasksResponseSchema,
  ResourceOwnerViewSchema,
  SubmitTaskBatchRequestSchema,
  SubmitTaskBatchResponseSchema,
  SubmitTaskRequestSchema,
  TaskPageSchema,
  TaskViewSchema,
} from './messages/admin.js';

export const JSON_SCHEMA_SOURCES = {
  'worker-message': WorkerMessageSchema,
  'coordinator-message': CoordinatorMessageSchema,
  error: ErrorMessageSchema,
  'sink-advance-request': AdvanceRequestSchema,
  'sink-advance-response': AdvanceResponseSchema,
  'sink-advance-batch-request': AdvanceBatchRequestSchema,
  'sink-advance-batch-response': AdvanceBatchResponseSchema,
  'sink-write-request': WriteRequestSchema,
  'sink-write-batch-request': WriteBatchRequestSchema,
  'sink-write-batch-response': WriteBatchResponseSchema,
  'sink-write-response': WriteResponseSchema,
  'sink-resource-view': ResourceViewSchema,
  'sink-stored-result': StoredResultSchema,
  'sink-decision-page': DecisionPageSchema,
  'sink-probe-request': ProbeRequestSchema,
  'sink-probe-response': ProbeResponseSchema,
  'sink-event': SinkEventSchema,
  'admin-submit-task-request': SubmitTaskRequestSchema,
  'admin-submit-task-batch-request': SubmitTaskBatchRequestSchema,
  'admin-submit-task-batch-response': SubmitTaskBatchResponseSchema,
  'admin-task-view': TaskViewSchema,
  'admin-task-page': TaskPageSchema,
  'admin-resource-owner-view': ResourceOwnerViewSchema,
  'admin-purge-tasks-request': PurgeTasksRequestSchema,
  'admin-purge-tasks-response': PurgeTasksResponseSchema,
  'admin-event': CoordinatorEventSchema,
} as const;

/** name -> pretty-printed JSON Schema text (with trailing newline), in a stable order. */
export function generateJsonSchemas(): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, schema] of Object.entries(JSON_SCHEMA_SOURCES)) {
    const json = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' });
    out[name] = `${JSON.stringify({ $id: `https://leasehold.dev/schemas/${name}.json`, ...json }, null, 2)}\n`;
  }
  return out;
}
