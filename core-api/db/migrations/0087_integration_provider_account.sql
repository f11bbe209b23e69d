-- The provider's own id of the account a connection was made to, for a provider whose webhooks
-- belong to the app rather than to a connection: Intercom sends every workspace where the app is
-- installed to the one webhook URL of the app, each notification naming its workspace (`app_id`).
-- Read at connect (Intercom: GET /me → app.id_code); deliveries are routed by it
-- (core-api/integrations/webhooks.ts). Several of the service's workspaces may connect the same
-- provider account: each gets the deliveries.
ALTER TABLE integrations ADD COLUMN provider_account_id text;
CREATE INDEX integrations_provider_account ON integrations (name, provider_account_id)
  WHERE status = 'connected' AND provider_account_id IS NOT NULL;
