import type { TSchema } from '#typebox';
import { CoreApiConfig } from '../core-api/config.js';
import { IngestConfig } from '../ingest/config.js';
import { ProcessorsConfig } from '../processors/config.js';

/*
 * docs/configuration.md, written from the tiers' config schemas (the ones each main.ts validates
 * the environment against), so the table of variables cannot drift from what the tiers accept:
 * `npm run docs:config` writes it, test/unit/config-docs.test.ts fails when the file differs.
 * Every variable needs a `description` in its schema; `docsDefault` stands in for a default that
 * depends on the machine (one process per core).
 */

interface Property {
  type?: string;
  default?: unknown;
  docsDefault?: string;
  description?: string;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  pattern?: string;
}

/** A table of the document: its heading and the variables it holds (regular expressions on names, first match wins). */
interface Group {
  title: string;
  names: RegExp;
}

interface Tier {
  title: string;
  command: string;
  schema: TSchema;
  groups: Group[];
}

const SERVERS: Group = { title: 'Servers', names: /^(NATS_URL|DATABASE_URL|CLICKHOUSE_.*)$/ };
const PROVIDERS: Group = {
  title: 'Integration providers (`INTEGRATION_<NAME>_*`, see [integrations.md](integrations.md))',
  names: new RegExp(
    '^INTEGRATION_(MICROSOFT_TENANT|[A-Z_]+_' +
      '(CLIENT_ID|CLIENT_SECRET|AUTHORIZE_URL|TOKEN_URL|REVOKE_URL|API_URL|SIGNING_SECRET))$',
  ),
};
const SECRETS: Group = { title: 'Secrets at rest', names: /^(DATA_ENCRYPTION_KEY|INTEGRATION_TOKEN_KEY)$/ };
const LOGGING: Group = { title: 'Logs and metrics', names: /^(LOG_LEVEL|GAUGES_INTERVAL_MS)$/ };

const TIERS: Tier[] = [
  {
    title: 'Ingest',
    command: 'node dist/ingest/main.js',
    schema: IngestConfig,
    groups: [
      {
        title: 'Listening and processes',
        names: /^(INGEST_(HOST|PORT|PROCESSES|MAX_INFLIGHT_BYTES|PG_POOL)|INGEST_.*_MB|INGEST_SINGLE_THREADED_GC)$/,
      },
      SERVERS,
      {
        title: 'Both surfaces',
        names: /^(INGEST_(PUBLISH_TIMEOUT_MS|FUTURE_SKEW_MS|AGE_GRACE_MS)|CUSTOMER_CACHE_.*|EVENTS_DAILY_QUOTAS)$/,
      },
      { title: 'Surface A (`/v1/ingest/*`, ingestion key)', names: /^INGEST_(RATE_LIMIT_PER_MIN|MAX_BODY_BYTES)$/ },
      { title: 'Surface B, the events API (`/v1/events*`)', names: /^(EVENTS_.*|IDEMPOTENCY_WAIT_MS)$/ },
      { title: 'Credentials of surface B', names: /^(PUBLIC_BASE_URL|INGEST_TRUSTED_PROXIES|JWT_.*)$/ },
      LOGGING,
    ],
  },
  {
    title: 'Processors',
    command: 'node dist/processors/bundle.js',
    schema: ProcessorsConfig,
    groups: [
      { title: 'Status endpoint and worker threads', names: /^PROCESSORS_.*$/ },
      SERVERS,
      { title: 'ClickHouse writers', names: /^WRITER_.*$/ },
      { title: 'Health scores', names: /^HEALTH_.*$/ },
      { title: 'Metrics', names: /^METRICS_.*$/ },
      { title: 'Playbooks', names: /^PLAYBOOKS_.*$/ },
      { title: 'Outbox and webhooks', names: /^(OUTBOX_.*|WEBHOOK_.*)$/ },
      SECRETS,
      PROVIDERS,
      { title: 'Integrations', names: /^(INTEGRATION_.*|NOTIFY_.*)$/ },
      { title: 'Alerts', names: /^ALERTS_.*$/ },
      { title: 'Erasure', names: /^ERASURE_.*$/ },
      LOGGING,
    ],
  },
  {
    title: 'Core API',
    command: 'node dist/core-api/bundle.js',
    schema: CoreApiConfig,
    groups: [
      {
        title: 'Listening and processes',
        names: /^(API_(HOST|PORT|PROCESSES|MAX_BODY_BYTES|TRUSTED_PROXIES)|PUBLIC_BASE_URL)$/,
      },
      SERVERS,
      { title: 'Access tokens', names: /^(JWT_.*|ACCESS_TOKEN_TTL_S)$/ },
      { title: 'Rate limits', names: /^API_(READS_PER_MIN|WRITES_PER_MIN|BULK_IMPORTS_PER_HOUR|PLAN_LIMITS)$/ },
      { title: 'Waits on ClickHouse and the processors', names: /^.*_TIMEOUT_MS$/ },
      { title: 'Webhooks', names: /^WEBHOOK_.*$/ },
      SECRETS,
      PROVIDERS,
      { title: 'Background work and caches', names: /^(HOUSEKEEPING_.*|ANALYTICS_.*)$/ },
      LOGGING,
    ],
  },
];

/**
 * Variables of the npm scripts (infra/, run before or beside the tiers). They are read where they
 * are used, not through a schema, so they are listed here by hand.
 */
const SCRIPT_VARIABLES: Array<[name: string, defaultText: string, description: string]> = [
  [
    'STACK_PROFILE',
    '`dev`',
    'Which local stack the scripts and bootstrap address: `dev` (ports 14222, 18123/19000, 15432; data `.data/dev`), ' +
      '`test` (24222, 28123/29000, 25432; `.data/test`) or `cluster` (30222–30224, 31123–31126/32000–32003, 30432, ' +
      'ZooKeeper 32181; `.data/cluster`); every fixed port lies below the kernel’s ephemeral range (32768 and up).',
  ],
  ['EVENTS_STREAM_MAX_BYTES', '`21474836480` (20 GiB)', 'Byte cap of the EVENTS stream, applied by `infra:up`.'],
  [
    'NATS_GOMAXPROCS',
    '`1`',
    'Go scheduler threads of nats-server, set before `infra:up`: sharing two cores with the tiers, one core ' +
      'spent 30 % less CPU per event than spreading each message over threads.',
  ],
  ['PUBLIC_INGEST_URL, PUBLIC_API_URL', 'the profile’s local URLs', 'What `bootstrap` prints.'],
  [
    'DATABASE_URL, DATA_ENCRYPTION_KEY, INTEGRATION_TOKEN_KEY',
    'the profile’s',
    '`bootstrap`, `seed` and `rotate-data-key` read them as the tiers do; by default the local stack’s database and ' +
      'its generated key (`.data/<profile>/integration-token.key`).',
  ],
  [
    'CLICKHOUSE_URL',
    'the profile’s',
    '`seed --demo` reads ClickHouse as the processors do: whether every demo event is stored, and the daily rollup ' +
      'its usage-drop check runs on.',
  ],
  [
    'ALERTS_USAGE_DROP_RATIO, ALERTS_USAGE_DROP_MIN_WEEKLY',
    'the processors’',
    '`seed --demo` runs the processors’ usage-drop check once, with these thresholds as the processors read them.',
  ],
  [
    'EVENTS_BACKFILLS_PER_MIN',
    '`600` under `npm start`',
    'The ingest tier’s limit (above): `npm start` sets 600 for the ingest tier it runs, unless the variable is set, ' +
      'so the demo’s backfill requests are not held to the default 10 a minute.',
  ],
];

const HEADER = `# Configuration

<!-- Written by \`npm run docs:config\` from the tiers' config schemas (infra/config-docs.ts): edit the
schemas' descriptions, not this file. test/unit/config-docs.test.ts fails when it is out of date. -->

Every tier reads environment variables only in its \`main.ts\`, validates them all at start against
one schema (\`ingest/config.ts\`, \`processors/config.ts\`, \`core-api/config.ts\`), reports every bad
value at once and refuses to start. Defaults fit \`npm start\`'s dev stack. A variable several tiers
read (\`NATS_URL\`, \`DATABASE_URL\`, \`LOG_LEVEL\`, …) is listed under each of them; give them all the
same value. The README's [Configuration](../README.md#configuration) section names the few a newcomer
sets.
`;

/** One line of a table cell: pipes escaped, and `<` so that `<tenant>` is not taken for an HTML tag. */
const escapeCell = (text: string) =>
  text
    .replace(/\s*\n\s*/g, ' ')
    .replace(/\|/g, '\\|')
    .replace(/</g, '&lt;');

const UNITS: Array<[ms: number, unit: string]> = [
  [86_400_000, 'day'],
  [3_600_000, 'h'],
  [60_000, 'min'],
  [1000, 's'],
];

/** A default as the table shows it, with a reading aid for long durations and byte counts. */
function defaultCell(name: string, p: Property): string {
  if (p.docsDefault !== undefined) return p.docsDefault;
  const value = p.default;
  if (value === undefined) return 'required';
  if (value === '') return 'empty';
  const shown = `\`${String(value).replace(/\|/g, '\\|')}\``;
  if (typeof value !== 'number' || value === 0) return shown;
  if (name.endsWith('_MS') && value >= 1000) {
    const [ms, unit] = UNITS.find(([ms]) => value % ms === 0 && value >= ms) ?? [1000, 's'];
    const n = value / ms;
    return `${shown} (${Number.isInteger(n) ? n : n.toFixed(1)} ${unit === 'day' && n !== 1 ? 'days' : unit})`;
  }
  if (name.endsWith('_BYTES') && value >= 1024) {
    for (const [size, unit] of [
      [1024 ** 3, 'GiB'],
      [1024 ** 2, 'MiB'],
      [1024, 'KiB'],
    ] as const)
      if (value >= size)
        return `${shown} (${Number.isInteger(value / size) ? value / size : (value / size).toFixed(2)} ${unit})`;
  }
  return shown;
}

function typeCell(p: Property): string {
  const type = p.type ?? 'string';
  const bounds: string[] = [];
  if (p.minimum !== undefined && p.maximum !== undefined) bounds.push(`${p.minimum}–${p.maximum}`);
  else {
    if (p.minimum !== undefined) bounds.push(`≥ ${p.minimum}`);
    if (p.exclusiveMinimum !== undefined) bounds.push(`> ${p.exclusiveMinimum}`);
    if (p.maximum !== undefined) bounds.push(`≤ ${p.maximum}`);
  }
  if (p.pattern !== undefined) bounds.push('pattern');
  return bounds.length ? `${type}, ${bounds.join(', ')}` : type;
}

/** The variables of a schema without a description: the generator refuses to write the document while any is left. */
export function undescribed(): string[] {
  return TIERS.flatMap((tier) =>
    Object.entries(properties(tier.schema))
      .filter(([, p]) => !p.description?.trim())
      .map(([name]) => `${tier.title}: ${name}`),
  );
}

const properties = (schema: TSchema) => (schema as { properties: Record<string, Property> }).properties;

function tierSection(tier: Tier): string[] {
  const vars = Object.entries(properties(tier.schema));
  const lines = [`## ${tier.title}`, '', `\`${tier.command}\``, ''];
  const groups = [...tier.groups, { title: 'Other', names: /^/ }];
  const taken = new Set<string>();
  for (const group of groups) {
    const rows = vars.filter(([name]) => !taken.has(name) && group.names.test(name));
    if (rows.length === 0) continue;
    lines.push(`### ${group.title}`, '', '| variable | type | default | description |', '|---|---|---|---|');
    for (const [name, p] of rows) {
      taken.add(name);
      lines.push(`| \`${name}\` | ${typeCell(p)} | ${defaultCell(name, p)} | ${escapeCell(p.description ?? '')} |`);
    }
    lines.push('');
  }
  return lines;
}

/** docs/configuration.md as the schemas describe it today. */
export function configurationDoc(): string {
  const missing = undescribed();
  if (missing.length) throw new Error(`config variables without a description: ${missing.join(', ')}`);
  const lines = [HEADER];
  for (const tier of TIERS) lines.push(...tierSection(tier));
  lines.push(
    '## Scripts',
    '',
    'Read by the npm scripts of `infra/` (`infra:up`, `start`, `bootstrap`, `seed`, `rotate-data-key`); some are ' +
      'tiers’ variables that a script reads as well, or sets for the tiers it runs.',
    '',
    '| variable | default | description |',
    '|---|---|---|',
    ...SCRIPT_VARIABLES.map(
      ([name, d, text]) =>
        `| ${name
          .split(', ')
          .map((n) => `\`${n}\``)
          .join(', ')} | ${d} | ${text} |`,
    ),
    '',
  );
  return lines.join('\n');
}
