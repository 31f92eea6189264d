/**
 * Options objects: callers pass `undefined` for "not set" (often straight from config), so
 * defaults are merged over the defined values only.
 */

/** The entries of `o` whose value is not `undefined`. */
export function definedOnly<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/** `defaults` overridden by the defined values of `options`. */
export function withDefaults<D extends object>(defaults: D, options: object): D {
  return { ...defaults, ...definedOnly(options) } as D;
}
