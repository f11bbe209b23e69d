import {
  EVENT_FIELDS,
  NEEDS_TARGET,
  type Calculation,
  type MetricFilter,
  type MetricWindow,
} from '../../schemas/core/metrics.js';

/**
 * A metric proposal from a plain-English description: deterministic, no outside service.
 * Vocabulary (docs/metrics.md has the full table):
 * - calculation: count / number of / how many / times → count; total / sum → sum; average / mean →
 *   avg; max / maximum / highest / peak / largest → max; unique / distinct → distinct_count;
 *   latest / last value / most recent / current → last_value; ever / whether / any / has … → exists;
 * - window: last|past N days|weeks|months (weeks 7 days, months 30), last week|month (7, 30 days),
 *   this week|month|quarter, week|month|quarter to date, today → calendar; default rolling 30 days;
 * - grain: across the portfolio / across all customers / overall / portfolio / workspace → portfolio;
 *   per customer / each customer / by customer (default) → customer;
 * - filters: `where|with|whose <property> is|is not|above|below|at least|at most|contains|one of <value>`,
 *   conditions joined by `and`;
 * - event and property names are matched against the catalog by their words (singular, without
 *   -ed / -ing), so "reports exported" finds report_exported and "order value" order_value.
 */

export interface CatalogEvent {
  event_name: string;
  property_keys: string[];
}

export interface ProposedMetric {
  name: string;
  source_event: string | null;
  calculation: Calculation;
  target_property: string | null;
  filter: MetricFilter[];
  window: MetricWindow;
  grain: 'customer' | 'portfolio';
  rationale: string;
  confidence: number;
}

const NUMBER_WORDS: Record<string, number> = {
  a: 1,
  an: 1,
  one: 1,
  two: 2,
  three: 3,
  four: 4,
  five: 5,
  six: 6,
  seven: 7,
  eight: 8,
  nine: 9,
  ten: 10,
  twelve: 12,
  fourteen: 14,
  thirty: 30,
  sixty: 60,
  ninety: 90,
};

const STOP = new Set(
  [
    'the a an of in on for per by to from with and or was were is are be been has have had did do',
    'does that which who whom what how many much number count total sum average mean each every all',
    'any ever whether customer customers their its our my last past previous this current days day',
    'weeks week months month quarter quarters today overall portfolio across workspace times time',
    'value latest most recent unique distinct max maximum highest peak largest biggest min avg sum',
    'events event so far at least',
  ]
    .join(' ')
    .split(' '),
);

/** A word's comparable form: lower case, singular, without -ed / -ing. */
export function stem(word: string): string {
  let w = word.toLowerCase();
  if (w.length > 4 && w.endsWith('ies')) w = `${w.slice(0, -3)}y`;
  else if (w.length > 4 && /(ches|shes|sses|xes)$/.test(w)) w = w.slice(0, -2);
  else if (w.length > 2 && w.endsWith('s') && !w.endsWith('ss')) w = w.slice(0, -1);
  if (w.length > 5 && w.endsWith('ing')) w = w.slice(0, -3);
  else if (w.length > 4 && w.endsWith('ed')) w = w.slice(0, -2);
  else if (w.length > 4 && w.endsWith('e')) w = w.slice(0, -1);
  return w;
}

const words = (s: string): string[] => s.toLowerCase().match(/[a-z0-9]+/g) ?? [];

/** Share of a snake_case name's words found among `stems`, 0..1. */
function nameScore(name: string, stems: Set<string>): number {
  const parts = name.split('_').filter(Boolean).map(stem);
  if (!parts.length) return 0;
  return parts.filter((p) => stems.has(p)).length / parts.length;
}

/** Stems of the words and of adjacent pairs written together ("log in" → login). */
function stemsOf(text: string): Set<string> {
  const ws = words(text);
  const out = new Set(ws.map(stem));
  for (let i = 0; i + 1 < ws.length; i++) out.add(stem(ws[i] + ws[i + 1]));
  return out;
}

function best<T extends string>(names: readonly T[], text: string): { name: T; score: number } | null {
  const stems = stemsOf(text);
  const lower = text.toLowerCase();
  let out: { name: T; score: number } | null = null;
  for (const n of names) {
    const exact = new RegExp(`(^|[^a-z0-9_])${n.replace(/[^a-z0-9_]/gi, '\\$&')}($|[^a-z0-9_])`, 'i').test(lower);
    const score = exact ? 1.01 : nameScore(n, stems);
    if (score === 0) continue;
    if (!out || score > out.score || (score === out.score && n.length > out.name.length)) out = { name: n, score };
  }
  return out;
}

const HOW_MATCHED = { exact: 'named', words: 'all its words found', partial: 'some of its words found', none: '' };

interface Found<T> {
  value: T;
  matched: boolean;
  rest: string;
}

const CALENDAR = new RegExp(
  '\\b(?:(?:so far )?(?:in |during |for )?this (week|month|quarter)(?: so far)?' +
    '|(week|month|quarter)[ -]to[ -]date|(today))\\b',
);
const PORTFOLIO = new RegExp(
  '\\b(?:across (?:the |our |all )?(?:whole )?(?:portfolio|customers|workspace|accounts)|overall|portfolio[- ]wide' +
    '|for the (?:whole )?portfolio|in the portfolio|workspace[- ]wide|in total across)\\b',
);
/** Where a filter clause's next condition starts: `and` before `<property> <operator word>`. */
const NEXT_CONDITION = new RegExp(
  "\\s+and\\s+(?=[a-z_][\\w.]*\\s+(?:is|isn't|equals|contains|includes|above|below|over|under|at|in|one" +
    '|more|less|greater|exceeds|[<>=!]))',
  'i',
);

function findWindow(text: string): Found<MetricWindow> {
  const n = '(\\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|twelve|fourteen|thirty|sixty|ninety)';
  const rolling = new RegExp(
    '\\b(?:in |over |during |for |within )?(?:the )?(?:last|past|previous|trailing) ' +
      `(?:${n} )?(day|week|fortnight|month)s?\\b`,
  );
  const m = rolling.exec(text);
  if (m) {
    const count = m[1] === undefined ? 1 : /^\d+$/.test(m[1]) ? Number(m[1]) : NUMBER_WORDS[m[1]];
    const days = Math.min(365, Math.max(1, count * { day: 1, week: 7, fortnight: 14, month: 30 }[m[2] as 'day']));
    return { value: { type: 'rolling', days }, matched: true, rest: text.replace(m[0], ' ') };
  }
  const cal = CALENDAR.exec(text);
  if (cal) {
    const unit = (cal[1] ?? cal[2] ?? 'day') as 'day' | 'week' | 'month' | 'quarter';
    return { value: { type: 'calendar', unit }, matched: true, rest: text.replace(cal[0], ' ') };
  }
  return { value: { type: 'rolling', days: 30 }, matched: false, rest: text };
}

function findGrain(text: string): Found<'customer' | 'portfolio'> {
  const p = PORTFOLIO.exec(text);
  if (p) return { value: 'portfolio', matched: true, rest: text.replace(p[0], ' ') };
  const c = /\b(?:per|for each|for every|by|of each|each) (?:customer|account)\b/.exec(text);
  if (c) return { value: 'customer', matched: true, rest: text.replace(c[0], ' ') };
  return { value: 'customer', matched: false, rest: text };
}

const CALC_PATTERNS: Array<[Calculation, RegExp]> = [
  ['count', /\b(?:total number of|total count of|number of|how many|count of|count)\b/],
  ['exists', /^\s*(?:did|does|do|has|have|is|was)\b|\b(?:ever|whether|has any|have any|did any|at least once|any)\b/],
  ['distinct_count', /\b(?:unique|distinct)\b/],
  ['avg', /\b(?:average|mean|avg)\b/],
  ['max', /\b(?:maximum|max|highest|peak|largest|biggest)\b/],
  ['last_value', /\b(?:latest|last value of|most recent|current|last known)\b/],
  ['sum', /\b(?:total|sum of|sum|summed)\b/],
  ['count', /\b(?:times|how often|frequency of)\b/],
];

function findCalculation(text: string): Found<Calculation> & { at: number; word: string } {
  let hit: { calc: Calculation; at: number; word: string } | null = null;
  for (const [calc, re] of CALC_PATTERNS) {
    const m = re.exec(text);
    if (m) {
      hit = { calc, at: m.index + m[0].length, word: m[0] };
      break;
    }
  }
  if (!hit) return { value: 'count', matched: false, rest: text, at: 0, word: '' };
  return { value: hit.calc, matched: true, rest: text, at: hit.at, word: hit.word };
}

const OPS: Array<[MetricFilter['op'], RegExp]> = [
  ['neq', /\s+(?:is not|isn't|does not equal|doesn't equal|not equal to|!=|is other than)\s+/],
  ['in', /\s+(?:is one of|is any of|one of|in)\s+/],
  ['gte', /\s+(?:is at least|at least|>=|is greater than or equal to|of at least)\s+/],
  ['lte', /\s+(?:is at most|at most|<=|is less than or equal to|of at most)\s+/],
  ['gt', /\s+(?:is above|above|is over|over|is more than|more than|is greater than|greater than|exceeds|>)\s+/],
  ['lt', /\s+(?:is below|below|is under|under|is less than|less than|<)\s+/],
  ['contains', /\s+(?:contains|includes|containing|including)\s+/],
  ['eq', /\s+(?:is|equals|=|==|of)\s+/],
];

const scalar = (raw: string): string | number => {
  const v = raw.trim().replace(/^["'`]|["'`]$/g, '');
  return /^-?\d+(?:\.\d+)?$/.test(v) ? Number(v) : v;
};

interface ParsedFilter {
  property: string;
  op: MetricFilter['op'];
  value: MetricFilter['value'];
}

function findFilters(original: string): { filters: ParsedFilter[]; rest: string } {
  const m = /\b(?:where|whose|with|when|if)\s+(.+)$/i.exec(original);
  if (!m) return { filters: [], rest: original };
  const clause = m[1].replace(/[.!?]+$/, '');
  const out: ParsedFilter[] = [];
  for (const part of clause.split(NEXT_CONDITION)) {
    for (const [op, re] of OPS) {
      const om = re.exec(` ${part} `);
      if (!om) continue;
      const property = part
        .slice(0, Math.max(0, om.index - 1))
        .trim()
        .replace(/^(?:the|its|their)\s+/i, '');
      const rawValue = ` ${part} `.slice(om.index + om[0].length).trim();
      if (!property || !rawValue) break;
      const value =
        op === 'in'
          ? rawValue
              .split(/\s*(?:,|\bor\b|\band\b)\s*/)
              .filter(Boolean)
              .map(scalar)
          : scalar(rawValue);
      out.push({ property, op, value });
      break;
    }
  }
  return { filters: out, rest: original.slice(0, m.index) };
}

/** A snake_case guess at an event from the words around the calculation, when the catalog has no match. */
function guessEvent(text: string): string | null {
  const snake = /\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b/.exec(text);
  if (snake) return snake[0];
  const ws = words(text).filter((w) => !STOP.has(w) && !/^\d+$/.test(w));
  const singular = (w: string) => (w.length > 3 && w.endsWith('s') && !w.endsWith('ss') ? w.slice(0, -1) : w);
  return ws.length ? ws.slice(0, 3).map(singular).join('_') : null;
}

const nameOf = (description: string): string => {
  const s = description
    .trim()
    .replace(/\s+/g, ' ')
    .replace(/[.!?]+$/, '');
  // Cut by code points: a cut inside a surrogate pair leaves a string no jsonb or UTF-8 can hold.
  const points = [...s];
  const short =
    points.length > 80
      ? `${points
          .slice(0, 77)
          .join('')
          .replace(/\s+\S*$/, '')}…`
      : s;
  return short.charAt(0).toUpperCase() + short.slice(1);
};

export function proposeMetric(description: string, catalog: CatalogEvent[]): ProposedMetric {
  const notes: string[] = [];
  let confidence = 1;
  const { filters: rawFilters, rest: beforeFilters } = findFilters(description.trim());
  let text = ` ${beforeFilters.toLowerCase().replace(/[^\w\s<>=!'.-]/g, ' ')} `;
  const win = findWindow(text);
  text = win.rest;
  const grain = findGrain(text);
  text = grain.rest;
  const calc = findCalculation(text);

  // The event: the catalog name whose words the description holds, without the calculation's object.
  const names = catalog.map((e) => e.event_name);
  let ev = best(names, text);
  if (!ev || ev.score < 1) {
    // Half an event name plus one of its property keys ("order value" → order_placed.order_value).
    const stems = stemsOf(text);
    for (const e of catalog) {
      const s = nameScore(e.event_name, stems);
      if (s >= 0.5 && e.property_keys.some((k) => k.includes('_') && nameScore(k, stems) === 1)) {
        const boosted = Math.min(0.95, s + 0.25);
        if (!ev || boosted > ev.score) ev = { name: e.event_name, score: boosted };
      }
    }
  }
  let source: string | null;
  let eventMatched: 'exact' | 'words' | 'partial' | 'none';
  if (ev && ev.score > 1) {
    source = ev.name;
    eventMatched = 'exact';
  } else if (ev && ev.score === 1) {
    source = ev.name;
    eventMatched = 'words';
    confidence *= 0.9;
  } else if (ev && ev.score >= 0.5) {
    source = ev.name;
    eventMatched = 'partial';
    confidence *= ev.score > 0.5 ? 0.75 : 0.6;
  } else {
    source = guessEvent(text.slice(calc.at));
    eventMatched = 'none';
    confidence *= 0.3;
  }
  notes.push(
    eventMatched === 'none'
      ? `no catalog event matches the description${source ? `; guessed ${source}` : ''}`
      : `event ${source} (${HOW_MATCHED[eventMatched]})`,
  );

  const keys = catalog.find((e) => e.event_name === source)?.property_keys ?? [];
  let calculation = calc.value;
  if (!calc.matched) confidence *= 0.8;
  notes.push(calc.matched ? `${calculation} from "${calc.word.trim()}"` : 'count by default');

  // The target: a property of that event named after the calculation word.
  let target: string | null = null;
  if (NEEDS_TARGET.has(calculation) || calculation === 'last_value') {
    const after = text.slice(calc.at);
    const eventStems = new Set((source ?? '').split('_').map(stem));
    const candidates = keys.filter((k) => !k.split('_').every((p) => eventStems.has(stem(p))) || keys.length === 1);
    // A key made only of the event's words ("seats" of seat_added) only when no other key is named;
    // last_value then means the time of the latest event.
    const t = best(candidates, after) ?? (calculation === 'last_value' ? null : best(keys, after));
    if (t && t.score >= 1) {
      target = t.name;
      notes.push(`target property ${target}`);
    } else if (calculation === 'last_value') {
      notes.push('no property named: the time of the latest event');
    } else {
      confidence *= 0.5;
      const guess = words(after).find((w) => !STOP.has(w) && !eventStems.has(stem(w)));
      target = guess ?? null;
      notes.push(target ? `target property ${target} is not among the event's keys` : 'no target property found');
    }
  }
  if (calculation === 'distinct_count' && !target && /\busers?\b/.test(text)) {
    // Distinct users need user_id, an event field rather than a property.
    notes.push('distinct users are not a property; counted events instead');
    calculation = 'count';
  }

  const filter: MetricFilter[] = [];
  const fields = [...keys, ...EVENT_FIELDS];
  for (const f of rawFilters) {
    const exact = fields.find((k) => k === f.property.toLowerCase().replace(/^properties\./, ''));
    const fuzzy = exact ? { name: exact, score: 1 } : best(fields, f.property);
    const name = fuzzy && fuzzy.score >= 0.5 ? fuzzy.name : f.property.toLowerCase().replace(/\s+/g, '_');
    if (!fuzzy || fuzzy.score < 0.5) {
      confidence *= 0.6;
      notes.push(`filter property ${name} is not among the event's keys`);
    } else if (!exact) confidence *= 0.9;
    const field = (EVENT_FIELDS as readonly string[]).includes(name) ? name : `properties.${name}`;
    filter.push({ field, op: f.op, value: f.value });
  }
  if (filter.length) notes.push(`${filter.length} filter(s)`);
  if (!win.matched && calculation === 'exists' && /\bever\b/.test(text)) {
    // "ever" asks for all time; a window is at most 365 days.
    win.value = { type: 'rolling', days: 365 };
    notes.push('window: "ever" read as the longest window, 365 days');
  } else if (!win.matched) {
    confidence *= 0.85;
    notes.push('window: the last 30 days by default');
  } else {
    notes.push(
      win.value.type === 'rolling'
        ? `window: the last ${win.value.days} days`
        : win.value.unit === 'day'
          ? 'window: today so far'
          : `window: this ${win.value.unit} so far`,
    );
  }
  notes.push(`grain ${grain.value}${grain.matched ? '' : ' by default'}`);

  return {
    name: nameOf(description),
    source_event: source,
    calculation,
    target_property: target,
    filter,
    window: win.value,
    grain: grain.value,
    rationale: `${notes.join('; ')}.`,
    confidence: Math.round(confidence * 100) / 100,
  };
}
