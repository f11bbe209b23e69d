import { SCOPE_DESCRIPTIONS, type Scope } from '../../schemas/core/scopes.js';
import type { Reply } from '../http/context.js';

const esc = (s: string) =>
  s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

/** The page must never be framed (clickjacking on the consent button) nor cached (it carries the request). */
const PAGE_HEADERS: Array<[string, string]> = [
  ['Content-Security-Policy', "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'"],
  ['X-Frame-Options', 'DENY'],
  ['Referrer-Policy', 'no-referrer'],
  ['Cache-Control', 'no-store'],
];

const STYLE = `body{font-family:system-ui,sans-serif;max-width:28rem;margin:3rem auto;padding:0 1rem;color:#1d2430}
h1{font-size:1.3rem}label{display:block;margin:.8rem 0 .2rem}\
input[type=email],input[type=password]{width:100%;padding:.5rem;box-sizing:border-box}
ul{padding-left:1.2rem}.err{background:#fde8e8;border:1px solid #e0a0a0;padding:.6rem;border-radius:4px}
.actions{margin-top:1.2rem;display:flex;gap:.6rem}button{padding:.55rem 1.1rem;font-size:1rem}`;

function layout(title: string, body: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" \
content="width=device-width,initial-scale=1"><title>${esc(title)}</title>\
<style>${STYLE}</style></head><body>${body}</body></html>`;
}

export function errorPage(status: number, title: string, message: string): Reply {
  return {
    status,
    text: layout(
      title,
      `<h1>${esc(title)}</h1><p class="err" role="alert">${esc(message)}</p>\
<p>Return to the application and try again.</p>`,
    ),
    contentType: 'text/html; charset=utf-8',
    headers: PAGE_HEADERS,
  };
}

/** A page that says something went well (the integration callback's answer). */
export function noticePage(status: number, title: string, message: string): Reply {
  return {
    status,
    text: layout(title, `<h1>${esc(title)}</h1><p role="status">${esc(message)}</p><p>You can close this window.</p>`),
    contentType: 'text/html; charset=utf-8',
    headers: PAGE_HEADERS,
  };
}

export interface ConsentView {
  appName: string;
  scopes: string[];
  hidden: Record<string, string>;
  email?: string;
  error?: string;
}

export function consentPage(v: ConsentView, status = 200): Reply {
  const hidden = Object.entries(v.hidden)
    .map(([k, val]) => `<input type="hidden" name="${esc(k)}" value="${esc(val)}">`)
    .join('');
  const scopes = v.scopes
    .map((s) => `<li><code>${esc(s)}</code> — ${esc(SCOPE_DESCRIPTIONS[s as Scope] ?? s)}</li>`)
    .join('');
  const body = `<h1>Sign in to authorize ${esc(v.appName)}</h1>
${v.error ? `<p class="err" role="alert" id="error">${esc(v.error)}</p>` : ''}
<p><strong>${esc(v.appName)}</strong> asks to act for you with these permissions:</p><ul id="scopes">${scopes}</ul>
<form method="post" action="/v1/oauth/authorize" autocomplete="on">${hidden}
<label for="email">E-mail</label><input id="email" name="email" type="email" required \
autocomplete="username" value="${esc(v.email ?? '')}">
<label for="password">Password</label><input id="password" name="password" type="password" required \
autocomplete="current-password">
<div class="actions"><button type="submit" name="decision" value="approve" id="approve">Sign in and allow</button>
<button type="submit" name="decision" value="deny" id="deny" formnovalidate>Deny</button></div></form>`;
  return {
    status,
    text: layout(`Authorize ${v.appName}`, body),
    contentType: 'text/html; charset=utf-8',
    headers: PAGE_HEADERS,
  };
}
