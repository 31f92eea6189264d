/** A URL safe to print in a message or log: its password replaced by `***`. */
export function redactUrl(url: string, unparsable = '(unparsable URL)'): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    // Several hosts (libpq's postgres://u:p@h1,h2/db) are not a WHATWG URL: hide the password by its place.
    const m = /^([a-z][a-z0-9+.-]*:\/\/)([^@/]*@)?(.*)$/i.exec(url);
    if (!m) return unparsable;
    const user = m[2] === undefined ? '' : m[2].includes(':') ? `${m[2].slice(0, m[2].indexOf(':'))}:***@` : m[2];
    return `${m[1]}${user}${m[3]}`;
  }
}
