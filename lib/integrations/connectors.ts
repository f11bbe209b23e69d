/**
 * The connectors a workspace can connect (docs/integrations.md), their category, the OAuth scope
 * asked for (what the e-mail and calendar sync reads, what notify sends), and the activity types a
 * provider of that category may push.
 */

export const CONNECTORS = {
  gmail: {
    category: 'email',
    scope: 'https://www.googleapis.com/auth/gmail.readonly https://www.googleapis.com/auth/gmail.send openid email',
  },
  outlook: { category: 'email', scope: 'offline_access User.Read Mail.Read Mail.Send' },
  google_calendar: { category: 'calendar', scope: 'https://www.googleapis.com/auth/calendar.readonly openid email' },
  outlook_calendar: { category: 'calendar', scope: 'offline_access User.Read Calendars.Read' },
  slack: { category: 'chat', scope: 'chat:write' },
  teams: { category: 'chat', scope: 'offline_access ChannelMessage.Send' },
  // Zendesk: read (tickets, users, the webhook's signing secret) and webhooks:write (the webhook is
  // created at connect). Intercom takes no scope parameter: its permissions are set on the app in
  // the Developer Hub (docs/integrations.md).
  zendesk: { category: 'ticketing', scope: 'read webhooks:write' },
  intercom: { category: 'ticketing', scope: '' },
} as const;

export type ConnectorName = keyof typeof CONNECTORS;
export type Category = (typeof CONNECTORS)[ConnectorName]['category'];
export const CONNECTOR_NAMES = Object.keys(CONNECTORS) as ConnectorName[];

export const isConnector = (name: string): name is ConnectorName => Object.hasOwn(CONNECTORS, name);

/** The service's event names a provider of each category pushes (chat providers push none). */
export const ACTIVITY_TYPES: Record<Category, readonly string[]> = {
  email: ['email_sent', 'email_received'],
  calendar: ['meeting_held'],
  ticketing: ['ticket_opened', 'ticket_closed'],
  chat: [],
};
