import postgres from 'postgres';

export type Sql = postgres.Sql;

export function connectPg(url: string, max = 10): Sql {
  return postgres(url, { max, idle_timeout: 30, connect_timeout: 10, onnotice: () => {} });
}
