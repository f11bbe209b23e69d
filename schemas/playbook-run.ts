/**
 * Evaluate a playbook now (POST /v1/playbooks/{id}/run): the core NATS request the core API sends
 * and the playbook runner (processors/playbooks/) answers once the run is recorded in
 * `playbook_runs` (and, unless a dry run, its tasks are committed), so the core API then reads it.
 */
export interface PlaybookRunRequest {
  tenant_id: string;
  playbook_id: string;
  dry_run: boolean;
}

export type PlaybookRunReply =
  | { ok: true; run_id: string }
  | { ok: false; error: 'invalid_request' | 'unknown_playbook' | 'playbook_disabled' | 'run_failed' };

/** Seconds a client should wait after `runner_unavailable`. */
export const PLAYBOOK_RUN_RETRY_AFTER_S = 30;
