/**
 * One deployment, one truth (DESIGN invariant 9): the settings uniqueness depends on, recorded
 * once per deployment in Postgres. Every process states what it holds (its view); this module
 * judges a view against the record and says which paths a difference closes on that process.
 * Pure: the record is read and written in src/store/deployment-record.ts, watched in
 * src/deployment/.
 */

/** The settings, as named in the record (`idmint deployment show|set`). */
export const DEPLOYMENT_SETTINGS = [
  'worker-id-registry',
  'segment-fence',
  'zookeeper-identity',
  'snowflake-layout',
  'region',
  'obfuscation-key-fingerprint',
  'signing-key-id',
] as const;
export type DeploymentSetting = (typeof DEPLOYMENT_SETTINGS)[number];

/** What a process closes while its view differs: it hands out nothing a difference could repeat. */
export type GuardedPath = 'snowflake' | 'uid' | 'segments' | 'obfuscated' | 'signing';

/**
 * A process's value when it lacks something the deployment may have (no IDMINT_OBFUSCATION_KEY):
 * never recorded; it differs only from a recorded value, and closes what needs it.
 */
export const NOT_SET = 'not set';

/** A process's values (a setting it does not use is absent), or the recorded ones. */
export type DeploymentView = Partial<Record<DeploymentSetting, string>>;

interface Rule {
  /** What an operator sets on the process to agree with the record. */
  readonly variables: string;
  /** The setting in words, for log lines and /readyz. */
  readonly what: string;
  /** What a process holding `mine` closes when the record says `recorded`. */
  closes(recorded: string, mine: string): GuardedPath[];
}

const RULES: Readonly<Record<DeploymentSetting, Rule>> = Object.freeze<Record<DeploymentSetting, Rule>>({
  'worker-id-registry': {
    variables: 'ZK_CONNECT, IDMINT_WORKER_ID_PROVIDER, IDMINT_WORKER_ID',
    what: 'the registry of Snowflake worker ids',
    // Two registries number workers independently: their ids (and so their IDs) can coincide.
    closes: () => ['snowflake'],
  },
  'segment-fence': {
    variables: 'ZK_CONNECT, IDMINT_SEGMENT_FENCE',
    what: 'the segment fence',
    // A process that fences where the deployment does not breaks nothing; one that does not fence
    // where the deployment does would hand out segments no failover check can see.
    closes: (recorded) => (recorded === 'off' ? [] : ['segments']),
  },
  'zookeeper-identity': {
    variables: 'IDMINT_ZK_AUTH',
    what: "the ZooKeeper identity that owns idmint's nodes",
    closes: () => ['segments', 'snowflake'],
  },
  'snowflake-layout': {
    variables: 'the idmint version (the Snowflake layout is built in)',
    what: 'the Snowflake layout',
    closes: () => ['snowflake'],
  },
  region: {
    variables: 'IDMINT_REGIONS, IDMINT_REGION, IDMINT_REGION_STRIPE',
    what: 'the region split',
    // Segments read the split from the counter row itself; worker ids take it at start.
    closes: () => ['snowflake', 'uid'],
  },
  'obfuscation-key-fingerprint': {
    variables: 'IDMINT_OBFUSCATION_KEY',
    what: 'the obfuscation key',
    closes: () => ['obfuscated'],
  },
  'signing-key-id': {
    variables: 'IDMINT_SIGNING_KEY',
    what: 'the key that signs Kafka pool blocks and replies',
    // Consumers verify with the deployment's public keys: what another key signs they drop.
    closes: () => ['signing'],
  },
});

export function settingRule(setting: DeploymentSetting): Readonly<Rule> {
  return RULES[setting];
}

/** Settings recorded in idmint_setting (the region lives in idmint_region). */
export const RECORDED_SETTINGS: readonly DeploymentSetting[] = DEPLOYMENT_SETTINGS.filter((s) => s !== 'region');

export interface RecordState {
  /** The recorded values; a setting never recorded, or removed, is absent. */
  readonly values: DeploymentView;
  /** Every setting the record ever held: one absent from `values` but listed here was removed. */
  readonly ever: ReadonlySet<DeploymentSetting>;
}

export interface Difference {
  readonly setting: DeploymentSetting;
  readonly recorded: string | undefined;
  readonly mine: string;
  /** The record lost this setting (deleted by hand): noticed, never re-claimed silently. */
  readonly vanished: boolean;
  /** What this process refuses while the difference lasts (none: noticed and reported only). */
  readonly closes: readonly GuardedPath[];
  readonly message: string;
}

/**
 * The differences between a process's view and the record. `held` is what this process saw
 * recorded before (at its start or last check): a setting that vanished while the process held
 * the value it holds costs nothing (no one else may record another: the record lists it as ever
 * recorded), it is only reported; a process that never saw it recorded cannot confirm its value
 * and closes what depends on it until an operator restores it.
 */
export function judge(record: RecordState, mine: DeploymentView, held: DeploymentView = {}): Difference[] {
  const out: Difference[] = [];
  for (const setting of DEPLOYMENT_SETTINGS) {
    const value = mine[setting];
    if (value === undefined) continue;
    const rule = RULES[setting];
    const recorded = record.values[setting];
    if (recorded === value) continue;
    if (value === NOT_SET && recorded === undefined) continue;
    if (recorded === undefined) {
      if (!record.ever.has(setting)) continue; // not recorded yet: the caller claims it
      const confirmed = held[setting] === value;
      out.push({
        setting,
        recorded,
        mine: value,
        vanished: true,
        closes: confirmed ? [] : allPaths(setting),
        message: confirmed
          ? `${rule.what} vanished from the deployment record while this process held it ("${value}"); it keeps serving with that value. Restore it with \`idmint deployment set ${setting} ${quote(value)}\``
          : `${rule.what} was removed from the deployment record, so this process cannot confirm its own ("${value}", from ${rule.variables}); refused here: ${describePaths(allPaths(setting))}. Restore it with \`idmint deployment set ${setting} <value>\` (\`idmint deployment show\` lists what live processes hold)`,
      });
      continue;
    }
    const closes = rule.closes(recorded, value);
    out.push({
      setting,
      recorded,
      mine: value,
      vanished: false,
      closes,
      message:
        `${rule.what} differs: the deployment recorded "${recorded}", this process has "${value}" (check ${rule.variables}); ` +
        (closes.length > 0 ? `refused here: ${describePaths(closes)}` : 'nothing is refused, but set it as the other processes have it') +
        `. To change the deployment itself: \`idmint deployment set ${setting} …\``,
    });
  }
  return out;
}

/** The settings of `mine` the record has never held: the first process to use one records it. */
export function unclaimed(record: RecordState, mine: DeploymentView): DeploymentView {
  const out: DeploymentView = {};
  for (const setting of RECORDED_SETTINGS) {
    const value = mine[setting];
    if (value !== undefined && value !== NOT_SET && !record.ever.has(setting) && record.values[setting] === undefined) out[setting] = value;
  }
  return out;
}

/** Every path a setting could close, whatever the values: what an unconfirmed setting closes. */
function allPaths(setting: DeploymentSetting): GuardedPath[] {
  return setting === 'segment-fence' ? ['segments'] : RULES[setting].closes('', '');
}

const PATH_WORDS: Readonly<Record<GuardedPath, string>> = {
  snowflake: 'Snowflake IDs (fallback included)',
  uid: 'uid-mode IDs',
  segments: 'new segments (pools already filled still serve)',
  obfuscated: 'obfuscated tags',
  signing: 'Kafka pool blocks and replies (nothing this process signs would be accepted)',
};

export function describePaths(paths: readonly GuardedPath[]): string {
  return paths.map((p) => PATH_WORDS[p]).join(', ');
}

function quote(value: string): string {
  return /^[\w./:@+-]+$/.test(value) ? value : `'${value.replace(/'/g, "'\\''")}'`;
}
