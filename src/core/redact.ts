/** A URL safe to print in a message or log: its password replaced by `***`. */
export function redactUrl(url: string, unparsable = '(unparsable URL)'): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return unparsable;
  }
}
