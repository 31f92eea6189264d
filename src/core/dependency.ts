/** A server idmint depends on: errors name it (`details.dependency`), and its outage is logged once per process (episode.ts). */
export type Dependency = 'postgres' | 'redis' | 'zookeeper' | 'kafka';
