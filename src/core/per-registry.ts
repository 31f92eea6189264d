/**
 * A room's metrics, made on first use of a registry and shared by every component that registers
 * on it: prom-client refuses a second metric of one name on a registry, and several pools,
 * responders or refill processors of one process (or one test) share it. Inline
 * `new Gauge({ registers: [registry] })` is left to a component made once per registry whose
 * metrics read its own state (the dispenser's metrics, readiness, the deployment watch).
 */
export function perRegistry<R extends object, T>(make: (registry: R) => T): (registry: R) => T {
  const made = new WeakMap<R, T>();
  return (registry) => {
    let metrics = made.get(registry);
    if (metrics === undefined) {
      metrics = make(registry);
      made.set(registry, metrics);
    }
    return metrics;
  };
}
