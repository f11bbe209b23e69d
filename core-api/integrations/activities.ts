/** Activity into events is shared with the processors (the Zendesk backfill, the sync): lib/integrations. */
export { storeActivities } from '../../lib/integrations/activities.js';
