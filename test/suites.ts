/**
 * Which stack tests may run side by side. Most files only need workspaces of their own and tiers
 * on free ports, and spend their time waiting on the stack: they run concurrently (`tap --jobs`).
 * A file that does something another file running at the same time would see runs alone, after
 * them, in the serial group. The rule (test/README.md, "Serial or concurrent"): a file is serial
 * when it
 *   1. stops, kills or restarts a server of the shared stack (its pid files, infra/cli.js);
 *   2. changes what the shared servers hold for everyone: table settings or statistics (ALTER,
 *      ANALYZE), stream or consumer configuration, the schema (infra/apply.ts);
 *   3. binds the profile's fixed ports (the edge, the tiers on profile.*Port);
 *   4. needs the shared writer consumers to itself: it publishes to the shared stream before its
 *      own writer starts and relies on no other writer taking the messages, or waits for the
 *      consumers to be idle (writersIdle), or SIGKILLs a processors tier (whatever that writer had
 *      fetched of other files' events would wait out the ack wait). A file that starts its tiers
 *      on a JetStream of its own (privateJetStream) does none of this to the others: it may run
 *      concurrently;
 *   5. runs a job over every workspace on a short interval (housekeeping purges);
 *   6. puts the machine under load on purpose and asserts on what the load achieved while its tiers
 *      restart: files beside it would take the CPU its restarted tiers need (no marker sees this).
 * The architecture test holds every file with a marker below to this list, so a new file cannot
 * break the rule unnoticed; what no marker can see (rule 4's publish-then-start) is the reviewer's.
 */
export const SERIAL: Readonly<Record<string, string>> = {
  'test/processors/clickhouse-outage.test.ts': "SIGKILLs the stack's clickhouse-server (1)",
  'test/processors/two-writers.test.ts': "SIGKILLs the stack's clickhouse-server (1)",
  'test/events/dedup-plans.test.ts': 'autovacuum off and ANALYZE on shared tables (2)',
  'test/ingest/resolver-plans.test.ts': 'n_distinct, autovacuum and ANALYZE on shared tables (2)',
  'test/infra/regranulate.test.ts': 'ALTER TABLE and infra/apply.ts, on a database of its own (2)',
  'test/e2e/edge.test.ts': "the edge and tiers on the profile's fixed ports (3)",
  // On a JetStream of its own it would still wait for no insert into csp.events to be running,
  // which other files' writers keep starting.
  'test/processors/exactly-once.test.ts': 'SIGKILLs its writer again and again; waits for idle writers (4)',
  'test/e2e/ingest-restart.test.ts':
    'more than 1,000 of 2,500 requests acknowledged while its ingest tier restarts (6)',
  'test/core-api/housekeeping.test.ts': 'purges every workspace every 2 s (5)',
  'test/processors/outbox-restart.test.ts': "stops and restarts the stack's PostgreSQL (1)",
  // Every core-api's start encrypts the secrets any workspace holds in clear, under its own keys.
  'test/webhooks/legacy-secrets.test.ts': "stores secrets in clear for every core-api's start to encrypt (2)",
  'test/webhooks/data-key-rotation.test.ts': "stores a secret in clear; its tiers' keys are not the stack's (2)",
  'test/cluster/faults.test.ts': "kills and restarts the cluster's servers (1)",
  'test/cluster/unknown-status.test.ts': "stops the cluster's ClickHouse replicas and ZooKeeper (1)",
  // A writer of another file's processors would take its request from the stream and insert it.
  'test/cluster/forwarded-insert.test.ts': 'publishes a request that no writer may take (4)',
  'test/chaos/chaos.test.ts': "kills and restarts the stack's servers (1)",
};

/**
 * The serial files that need the whole machine, not only servers of their own: they run last, one
 * at a time, on the test stack with nothing beside them. The rest of the serial group runs one at a
 * time on the `serial` stack, the test stack's twin (infra/stack.ts), while the concurrent group
 * runs on `test`: what rules 1-5 guard against then touches nobody (the cluster suite has no twin:
 * its serial files run after the others).
 */
export const ALONE: ReadonlySet<string> = new Set([
  'test/e2e/ingest-restart.test.ts', // rule 6
]);

/** What in a test file's source makes it serial, with the rule it falls under. */
export const SERIAL_MARKERS: ReadonlyArray<readonly [RegExp | ((source: string) => boolean), string]> = [
  [/['"`][\w-]+\.pid['"`]/, "reads a server's pid file (1)"],
  [/infra\/(cli|services)\.js|\bstackUp\b|\bserviceNamed\b/, 'starts or stops the stack (1)'],
  [/\bALTER\s+TABLE\b|\bANALYZE\b|autovacuum|n_distinct/i, 'changes table settings or statistics (2)'],
  [/infra\/apply\.js/, 'applies the schema (2)'],
  [/\bstreams\.(update|delete|purge)\(|\bconsumers\.(update|delete)\(/, 'reconfigures a stream or consumer (2)'],
  [/\bprofile\.\w+Port\b/, "uses the profile's fixed ports (3)"],
  [(s) => ownBus(s, /\bwritersIdle\(|\bnum_ack_pending\b/), "waits on the shared writers' consumer state (4)"],
  [
    (s) => ownBus(s, /\bprocessorsTier\(|startTier\(t, 'processors'/) && /\.stop\('SIGKILL'\)/.test(s),
    'SIGKILLs a processors tier (4)',
  ],
  [/HOUSEKEEPING_INTERVAL_MS/, 'runs the housekeeping purges on a short interval (5)'],
];

/** Rule 4 holds on the shared bus only: a file on a JetStream of its own keeps its writers to itself. */
const ownBus = (source: string, re: RegExp) => re.test(source) && !/\bprivateJetStream\(/.test(source);

/** The markers a test file's source has. */
export function serialMarkers(source: string): string[] {
  return SERIAL_MARKERS.filter(([m]) => (typeof m === 'function' ? m(source) : m.test(source))).map(([, why]) => why);
}

/**
 * The longest files of the concurrent group (wall time beside the others, 28 Nov 2026 03:40), started
 * first: a long file started last would run on alone at the end while the cores idle. The rest
 * follow in path order.
 */
export const LONGEST_FIRST: readonly string[] = [
  'test/erasure/erasure.test.ts',
  'test/sdk/faults.test.ts',
  'test/processors/row-format.test.ts',
  'test/infra/demo.test.ts',
  'test/processors/backlog.test.ts',
  'test/webhooks/delivery.test.ts',
  'test/playbooks/runner-kill.test.ts',
  'test/e2e/nats-crash.test.ts',
  'test/health/recalculate.test.ts',
  'test/playbooks/runner-event-late.test.ts',
  'test/fuzz/cases.test.ts',
  // About 26 s: three faults held until Prometheus fires and resolves their alerts.
  'test/observability/faults.test.ts',
];

/**
 * Where `dist/test/run.js` notes when the whole stack suite of the test profile last started (unix
 * seconds): `npm run test:clickhouse-current` checks the statements the stacks logged since, not those
 * of code that has changed since (test/clickhouse-current/recorded.ts).
 */
export const SUITE_STARTED = '.data/test/suite-started';
