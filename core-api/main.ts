import { hostname } from 'node:os';
import { configOrExit, loadConfig, ConfigError } from '../lib/config.js';
import { createLogger } from '../lib/logger.js';
import { connectNats, subjects } from '../lib/nats.js';
import { connectPg } from '../lib/pg.js';
import { SharedRateLimiter } from '../lib/rate-limit.js';
import { onShutdown, supervise } from '../lib/lifecycle.js';
import { listenOrExit, loadUws } from '../lib/http/uws.js';
import { drain, traffic as newTraffic } from '../lib/http/traffic.js';
import { Invalidations } from '../lib/credentials/invalidations.js';
import { buildRoutes } from './app.js';
import { ApiKeyStore } from '../lib/credentials/api-keys.js';
import { AuditLog } from '../lib/credentials/audit.js';
import { Authenticator, RevokedFamilies } from '../lib/credentials/authenticate.js';
import { trustedProxies } from '../lib/credentials/ip.js';
import { AccessTokens, loadSigningKey } from './auth/tokens.js';
import { Limits, type PlanLimits } from './http/limits.js';
import { ApiMetrics } from './http/metrics.js';
import { Router } from './http/router.js';
import { mount } from './http/server.js';
import { ClickHouseReader } from './clickhouse.js';
import { HealthHistory } from './health/history.js';
import { encryptLegacySecrets, HOUSEKEEPING_JOBS } from './housekeeping/jobs.js';
import { Housekeeping } from './housekeeping/schedule.js';
import { HousekeepingGauges } from './housekeeping/gauges.js';
import { PoolProbe, watchNats } from '../lib/prometheus.js';
import { Recalculator } from './health/recalculate.js';
import { MaterializeClient } from './metrics/materialize.js';
import { PlaybookRunClient } from './playbooks/run-client.js';
import { JobRunner } from './jobs/runner.js';
import { Notifier } from './notify.js';
import { providersFromConfig } from '../lib/integrations/config.js';
import { DataCipher } from '../lib/credentials/data-cipher.js';
import { CoreApiConfig } from './config.js';

const boot = createLogger('core-api');
const { cfg, planLimits, proxies } = configOrExit(boot, () => {
  const cfg = loadConfig(CoreApiConfig, process.env);
  let planLimits: Record<string, Partial<PlanLimits>>;
  try {
    planLimits = JSON.parse(cfg.API_PLAN_LIMITS) as Record<string, Partial<PlanLimits>>;
  } catch {
    throw new ConfigError('invalid configuration:\n  API_PLAN_LIMITS: must be JSON');
  }
  return { cfg, planLimits, proxies: trustedProxies('API_TRUSTED_PROXIES', cfg.API_TRUSTED_PROXIES) };
});

if (cfg.API_PROCESSES > 1 && process.env.API_WORKER === undefined) {
  boot.info({ processes: cfg.API_PROCESSES, port: cfg.API_PORT }, 'starting core-api processes');
  supervise(boot, cfg.API_PROCESSES, 'API_WORKER', process.env);
} else {
  await serve();
}

async function serve(): Promise<void> {
  const log = createLogger('core-api', cfg.LOG_LEVEL);
  const uws = loadUws(process.env);
  const sql = connectPg(cfg.DATABASE_URL, 10);
  const nc = await connectNats(cfg.NATS_URL, `core-api-${process.pid}`, log);
  const baseUrl = cfg.PUBLIC_BASE_URL.replace(/\/+$/, '');

  const key = await loadSigningKey(sql, { privatePem: cfg.JWT_PRIVATE_KEY, kid: cfg.JWT_KEY_ID });
  const tokens = new AccessTokens(key, baseUrl, cfg.ACCESS_TOKEN_TTL_S);
  const keys = new ApiKeyStore(sql);
  const revoked = new RevokedFamilies();
  const invalidations = new Invalidations(nc, log.child({ mod: 'invalidations' }))
    .on(subjects.apiKeyRevoked, (id) => keys.invalidate(id))
    .on(subjects.familyRevoked, (id) => revoked.add(id));
  await revoked.load(sql, cfg.ACCESS_TOKEN_TTL_S + 60);
  await invalidations.start({ watch: true });
  const notify = new Notifier(nc, invalidations);
  // Revocations sent while we were cut off from NATS were missed: forget what we cached.
  void (async () => {
    for await (const s of nc.status())
      if (s.type === 'reconnect') {
        keys.clear();
        await revoked.load(sql, cfg.ACCESS_TOKEN_TTL_S + 60).catch(() => {});
      }
  })();

  const defaults: PlanLimits = {
    reads_per_min: cfg.API_READS_PER_MIN,
    writes_per_min: cfg.API_WRITES_PER_MIN,
    bulk_imports_per_hour: cfg.API_BULK_IMPORTS_PER_HOUR,
  };
  const runner = new JobRunner(sql, notify, log.child({ mod: 'jobs' }));
  const audit = new AuditLog(sql, log.child({ mod: 'audit' }));
  const limiter = new SharedRateLimiter(sql);
  const clickhouse = new ClickHouseReader(
    cfg.CLICKHOUSE_URL,
    cfg.CLICKHOUSE_DATABASE,
    cfg.HEALTH_HISTORY_TIMEOUT_MS,
    log.child({ mod: 'clickhouse' }),
  );
  const history = new HealthHistory(clickhouse);
  const recalculator = new Recalculator(nc, cfg.HEALTH_RECALC_TIMEOUT_MS, log.child({ mod: 'health' }));
  const dataCipher = DataCipher.fromSettings(cfg.DATA_ENCRYPTION_KEY, cfg.INTEGRATION_TOKEN_KEY);
  const housekeepingLog = log.child({ mod: 'housekeeping' });
  const secretsUpgrade = dataCipher && encryptLegacySecrets(dataCipher, housekeepingLog);
  const routes = buildRoutes({
    sql,
    notify,
    log,
    baseUrl,
    tokens,
    runner,
    limits: defaults,
    limiter,
    history,
    recalculator,
    clickhouse,
    metricsQueryTimeoutMs: cfg.METRICS_QUERY_TIMEOUT_MS,
    materializeClient: new MaterializeClient(nc, cfg.METRICS_MATERIALIZE_TIMEOUT_MS, log.child({ mod: 'metrics' })),
    analyticsCacheTtlMs: cfg.ANALYTICS_CACHE_TTL_MS,
    playbookRunClient: new PlaybookRunClient(nc, cfg.PLAYBOOK_RUN_TIMEOUT_MS, log.child({ mod: 'playbooks' })),
    webhookPolicy: { allowHttp: cfg.WEBHOOK_ALLOW_HTTP, allowPrivate: cfg.WEBHOOK_ALLOW_PRIVATE },
    providers: providersFromConfig(cfg),
    dataCipher,
  });

  let dbOk = true;
  const probe = setInterval(() => {
    sql`SELECT 1`.then(
      () => {
        dbOk = true;
      },
      () => {
        dbOk = false;
      },
    );
  }, 2000);
  probe.unref();
  const housekeeping = new Housekeeping(
    sql,
    [...HOUSEKEEPING_JOBS, ...(secretsUpgrade ? [secretsUpgrade] : [])],
    housekeepingLog,
    {
      intervalMs: cfg.HOUSEKEEPING_INTERVAL_MS,
      holder: `core-api-${hostname()}-${process.pid}`,
    },
  );

  const traffic = newTraffic();
  const metrics = new ApiMetrics();
  watchNats(nc, metrics.registry);
  const poolProbe = new PoolProbe(metrics.registry, { api: sql }, cfg.GAUGES_INTERVAL_MS);
  // One process of the tier samples what is the same for all of them.
  const housekeepingGauges =
    (process.env.API_WORKER ?? '0') === '0'
      ? new HousekeepingGauges(sql, metrics.registry, housekeepingLog, {
          jobs: [...HOUSEKEEPING_JOBS, ...(secretsUpgrade ? [secretsUpgrade] : [])].map((j) => j.name),
          intervalMs: cfg.HOUSEKEEPING_INTERVAL_MS,
          everyMs: cfg.GAUGES_INTERVAL_MS,
        })
      : undefined;
  const app = mount(uws.App(), {
    router: new Router(routes),
    auth: new Authenticator(keys, tokens, revoked),
    limits: new Limits(sql, limiter, defaults, planLimits),
    audit,
    metrics,
    log,
    baseUrl,
    trustedProxies: proxies,
    maxBodyBytes: cfg.API_MAX_BODY_BYTES,
    traffic,
    ready: () => dbOk && !nc.isClosed(),
  });

  const listenSocket = await listenOrExit(app, cfg.API_HOST, cfg.API_PORT, log);
  runner.start();
  housekeeping.start();
  poolProbe.start();
  housekeepingGauges?.start();
  log.info({ host: cfg.API_HOST, port: cfg.API_PORT }, 'core-api listening');
  // What an older version left unencrypted, finished now rather than at the next housekeeping run.
  const upgrading = new AbortController();
  const upgraded = secretsUpgrade
    ?.run(sql, upgrading.signal)
    .then((n) => n > 0 && housekeepingLog.info({ rewritten: n }, 'secrets left by an older version encrypted'))
    .catch(
      (err: unknown) => upgrading.signal.aborted || housekeepingLog.warn({ err }, 'encrypting old secrets failed'),
    );
  if (!dataCipher) log.warn('no DATA_ENCRYPTION_KEY: secrets an older version stored in clear stay in clear');

  onShutdown(log, async () => {
    uws.us_listen_socket_close(listenSocket);
    upgrading.abort();
    await drain(traffic, Date.now() + 10_000);
    await upgraded;
    invalidations.stop();
    await runner.stop();
    await housekeeping.stop();
    poolProbe.stop();
    await housekeepingGauges?.stop();
    await audit.close();
    await nc.drain();
    await sql.end({ timeout: 5 });
    log.info('core-api stopped');
  });
}
