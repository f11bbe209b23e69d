import Type, { type Static } from '#typebox';
import { Cursor, DateOnly, Limit, Nullable, Timestamp, Uuid } from './common.js';

/** Tasks (SPEC.md "Task"; moves and outcomes decided in docs/playbooks.md "Tasks"). */

export const TASK_STATUSES = ['pending', 'in_progress', 'completed', 'skipped'] as const;
export const TASK_OUTCOMES = ['successful', 'unsuccessful', 'no_response', 'not_needed'] as const;
export type TaskStatus = (typeof TASK_STATUSES)[number];

const Title = Type.String({ minLength: 1, maxLength: 200, pattern: '\\S' });
const Description = Type.String({ maxLength: 5000 });

export const Task = Type.Object({
  id: Uuid,
  customer_id: Uuid,
  playbook_id: Nullable(Uuid),
  run_id: Nullable(Uuid),
  title: Type.String(),
  description: Nullable(Type.String()),
  status: Type.Union(TASK_STATUSES.map((s) => Type.Literal(s))),
  assignee_id: Nullable(Uuid),
  owner_id: Nullable(Uuid),
  due_date: Nullable(DateOnly),
  outcome: Nullable(Type.String()),
  notes: Nullable(Type.String()),
  created_at: Timestamp,
  updated_at: Timestamp,
  completed_at: Nullable(Timestamp),
});

export const TaskCreate = Type.Object(
  {
    customer_id: Uuid,
    title: Title,
    assignee_id: Type.Optional(Nullable(Uuid)),
    due_date: Type.Optional(Nullable(DateOnly)),
    description: Type.Optional(Nullable(Description)),
  },
  { additionalProperties: false },
);
export type TaskCreate = Static<typeof TaskCreate>;

export const TaskPatch = Type.Object(
  {
    status: Type.Optional(
      Type.Union([Type.Literal('pending'), Type.Literal('in_progress'), Type.Literal('skipped')], {
        description: 'pending ↔ in_progress, either → skipped; completion goes through POST …/complete.',
      }),
    ),
    assignee_id: Type.Optional(Nullable(Uuid)),
    due_date: Type.Optional(Nullable(DateOnly)),
    title: Type.Optional(Title),
    description: Type.Optional(Nullable(Description)),
  },
  { additionalProperties: false, minProperties: 1 },
);
export type TaskPatch = Static<typeof TaskPatch>;

export const TaskComplete = Type.Object(
  {
    outcome: Type.Union(TASK_OUTCOMES.map((s) => Type.Literal(s))),
    notes: Type.Optional(Nullable(Type.String({ maxLength: 10_000 }))),
  },
  { additionalProperties: false },
);
export type TaskComplete = Static<typeof TaskComplete>;

export const TaskListQuery = Type.Object(
  {
    owner_id: Type.Optional(Uuid),
    assignee_id: Type.Optional(Uuid),
    customer_id: Type.Optional(Uuid),
    playbook_id: Type.Optional(Uuid),
    status: Type.Optional(
      Type.String({
        pattern: `^(${TASK_STATUSES.join('|')})(,(${TASK_STATUSES.join('|')}))*$`,
        description: 'One status or several, comma-separated.',
      }),
    ),
    due_before: Type.Optional(DateOnly),
    due_after: Type.Optional(DateOnly),
    limit: Type.Optional(Limit),
    cursor: Type.Optional(Cursor),
  },
  { additionalProperties: false },
);
