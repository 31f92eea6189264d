// DOM building for the dashboard's page: every value goes in as a text node or an attribute value
// set through the DOM, never as markup (reports come from a shared Redis, and an admin's browser
// holds the token). No innerHTML anywhere.

const SVG_NS = 'http://www.w3.org/2000/svg';

/** Appends children: nodes as they are, anything else as text; null, undefined and false are skipped. */
function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

function setAttrs(el, attrs) {
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith('on')) throw new Error(`no handler attributes: ${name}`);
    el.setAttribute(name, value === true ? '' : String(value));
  }
  return el;
}

/** An HTML element: h('td', { class: 'n' }, '42'). */
export function h(tag, attrs, ...children) {
  return append(setAttrs(document.createElement(tag), attrs), children);
}

/** An SVG element: s('rect', { width: 10 }). */
export function s(tag, attrs, ...children) {
  return append(setAttrs(document.createElementNS(SVG_NS, tag), attrs), children);
}

/** A number as people read it; '—' when there is none. */
export const num = (v) => (v === null || v === undefined ? '—' : Math.round(v).toLocaleString('en-US'));

/** A length of time: '12 s', '4 min', '2 h'. */
export const span = (ms) =>
  ms < 120000 ? `${Math.max(0, Math.round(ms / 1000))} s` : ms < 7200000 ? `${Math.round(ms / 60000)} min` : `${Math.round(ms / 3600000)} h`;

/** How long ago: 'just now', '12 s ago'. */
export const ago = (ms) => (ms < 1500 ? 'just now' : `${span(ms)} ago`);

/** Short lists in one line: 'a, b, c and 12 more'. */
export function some(names, max = 8) {
  return names.length <= max ? names.join(', ') : `${names.slice(0, max).join(', ')} and ${names.length - max} more`;
}
