/**
 * A room's metrics, made on first use of a registry and shared by every component that registers
 * on it: prom-client refuses a second metric of one name on a registry, and several pools,
 * responders or refill processors of one process (or one test) share it. The one way a metric is
 * registered: `new Counter({ ..., registers: [registry] })`, by its room's `xMetrics(registry)`
 * made with this, or by the one owner whose state it reads at scrape time.
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
