import { ConfigError } from './errors.js';

/**
 * The one way options become settings: the defaults, overridden by the options' defined values
 * (callers pass `undefined` for "not set", often straight from config, and that must keep the
 * default), checked once, then frozen. `validate` throws an OptionsError naming the option.
 */
export function resolveOptions<D extends object, O extends object = Partial<D>>(
  defaults: D,
  options: O | undefined,
  validate?: (settings: D & O) => void,
): Readonly<D & O> {
  const settings = { ...defaults, ...definedOnly(options ?? {}) } as D & O;
  validate?.(settings);
  return Object.freeze(settings);
}

/** A constructor's option that is out of range or of the wrong kind: a programmer's or operator's mistake (CONFIG_INVALID). */
export class OptionsError extends ConfigError {
  constructor(
    readonly component: string,
    option: string,
    message: string,
  ) {
    super(`${component}: option ${option} ${message}`, option);
    this.name = 'OptionsError';
  }
}

/** Throws an OptionsError unless `settings[key]` is a safe integer in [min, max]. */
export function checkInteger<S extends object>(component: string, settings: S, key: keyof S & string, min: number, max = Number.MAX_SAFE_INTEGER): void {
  const value = settings[key] as unknown;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min || value > max) {
    const range = max === Number.MAX_SAFE_INTEGER ? `≥ ${min}` : `from ${min} to ${max}`;
    throw new OptionsError(component, key, `must be an integer ${range}, got ${String(value)}`);
  }
}

/** The entries of `o` whose value is not `undefined`. */
export function definedOnly<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/**
 * Frozen defaults with widened types (`{ poolSeconds: number }`, where Object.freeze would infer
 * the literal `60`), so options of the same shape can override them.
 */
export function defaults<T extends object>(values: T): Readonly<T> {
  return Object.freeze(values);
}
