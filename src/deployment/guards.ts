import { IdmintError } from '../core/errors.js';
import type { BizStore } from '../core/ports.js';

/**
 * A store that allocates no segment while `refusal()` names a reason: the deployment fences its
 * segments and this process does not (or not in the same place), so a segment it took would be
 * invisible to the check after a lossy failover (DESIGN invariant 8). Pools already filled still
 * serve; every other call passes through.
 */
export function guardAllocation<S extends Pick<BizStore, 'allocate'>>(store: S, refusal: () => string | undefined): S {
  const allocate: BizStore['allocate'] = (bizTag, step, options) => {
    const reason = refusal();
    if (reason !== undefined) return Promise.reject(new IdmintError('NOT_READY', reason));
    return store.allocate(bizTag, step, options);
  };
  return new Proxy(store, {
    get(target, prop, receiver) {
      if (prop === 'allocate') return allocate;
      const value: unknown = Reflect.get(target, prop, receiver);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}
