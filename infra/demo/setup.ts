/**
 * What the demo sets up on its data through the API, as the bodies it sends: three metrics (one
 * followed by a customer objective), two segments and two playbooks whose tasks land with the
 * customers' owners. The playbooks are created last, so their presence marks a finished demo.
 */

export const DEMO_METRICS = [
  {
    name: 'Reports exported',
    slug: 'reports_exported',
    description: 'Reports exported in the last 30 days.',
    source_event: 'report_exported',
    calculation: 'count',
    window: { type: 'rolling', days: 30 },
    grain: 'customer',
    unit: 'exports',
  },
  {
    name: 'Closed deal value',
    slug: 'closed_deal_value',
    description: 'Value of the deals closed in the product in the last 30 days.',
    source_event: 'deal_closed',
    calculation: 'sum',
    target_property: 'amount',
    filter: [{ field: 'properties.stage', op: 'eq', value: 'won' }],
    window: { type: 'rolling', days: 30 },
    grain: 'customer',
    unit: 'USD',
  },
  {
    name: 'Dashboards created',
    slug: 'dashboards_created',
    description: 'Dashboards built in the last 90 days.',
    source_event: 'dashboard_created',
    calculation: 'count',
    window: { type: 'rolling', days: 90 },
    grain: 'customer',
    unit: 'dashboards',
  },
] as const;

/** The objective: a customer's goal measured by the last metric. */
export const DEMO_OBJECTIVE = { name: 'Roll out team dashboards', metric: 'dashboards_created', target_value: 12 };

export const DEMO_SEGMENTS = [
  {
    name: 'Enterprise',
    description: 'Accounts worth 100k ARR or more.',
    rules: [{ field: 'arr', op: 'gte', value: 100_000 }],
  },
  {
    name: 'Renewing in 90 days',
    description: 'Renewal date within the next 90 days.',
    rules: [
      { field: 'days_to_renewal', op: 'gte', value: 0 },
      { field: 'days_to_renewal', op: 'lte', value: 90 },
    ],
    match: 'all',
  },
] as const;

export const DEMO_PLAYBOOKS = [
  {
    name: 'At-risk renewal',
    trigger: { type: 'condition', expression: 'health_status == "at_risk" and segment == "Renewing in 90 days"' },
    actions: [
      {
        type: 'create_task',
        title: 'Book a renewal call',
        assignee: 'owner',
        due_in_days: 5,
        description: 'Health is at risk and the renewal is less than 90 days away: agree a success plan.',
      },
    ],
  },
  {
    name: 'Usage drop follow-up',
    trigger: { type: 'condition', expression: 'open_alerts > 0 and status != "churned"' },
    actions: [
      {
        type: 'create_task',
        title: 'Find out why usage dropped',
        assignee: 'owner',
        due_in_days: 3,
        description: 'Usage fell below half of its baseline this week (usage_drop alert).',
      },
    ],
  },
] as const;
