import { reply, STATUS_TEXT, type HttpResponse, type ReplyState, type TemplatedApp } from './uws.js';

export interface Probes {
  ready: () => boolean;
  metrics: { render(): Promise<string>; contentType: string };
}

/** /healthz, /readyz and /metrics of a tier, for GET and HEAD. */
export function probeRoutes(app: TemplatedApp, p: Probes): TemplatedApp {
  const health = (head: boolean) => (res: HttpResponse) =>
    reply(res, { aborted: false, head }, STATUS_TEXT[200], [['Content-Type', 'application/json']], '{"status":"ok"}');
  const readiness = (head: boolean) => (res: HttpResponse) => {
    const ok = p.ready();
    reply(
      res,
      { aborted: false, head },
      STATUS_TEXT[ok ? 200 : 503],
      [['Content-Type', 'application/json']],
      ok ? '{"status":"ready"}' : '{"status":"not ready"}',
    );
  };
  const metrics = (head: boolean) => (res: HttpResponse) => {
    const state: ReplyState = { aborted: false, head };
    res.onAborted(() => {
      state.aborted = true;
    });
    p.metrics
      .render()
      .then((text) => reply(res, state, STATUS_TEXT[200], [['Content-Type', p.metrics.contentType]], text));
  };
  return app
    .get('/healthz', health(false))
    .head('/healthz', health(true))
    .get('/readyz', readiness(false))
    .head('/readyz', readiness(true))
    .get('/metrics', metrics(false))
    .head('/metrics', metrics(true));
}
