/**
 * Kafka errors idmint acts on, recognised through KafkaJS's wrappers (a retried error carries the
 * last one as `originalError` or `cause`). No KafkaJS import: a process without Kafka loads none.
 */

/** True when `err`, or an error it wraps, matches `test`. */
function anyCause(err: unknown, test: (e: Error) => boolean): boolean {
  const seen = new Set<unknown>();
  let e: unknown = err;
  while (e instanceof Error && !seen.has(e)) {
    seen.add(e);
    if (test(e)) return true;
    e = (e as { originalError?: unknown }).originalError ?? e.cause;
  }
  return false;
}

/** A topic or partition the broker asked does not know (deleted, or created a moment ago on another broker). */
export function isUnknownTopic(err: unknown): boolean {
  return anyCause(
    err,
    (e) => (e as { type?: unknown }).type === 'UNKNOWN_TOPIC_OR_PARTITION' || /does not host this topic-partition|unknown topic/i.test(e.message),
  );
}

/** A partition without a leader (an election, or every replica's broker down). */
export function isLeaderNotAvailable(err: unknown): boolean {
  return anyCause(err, (e) => /LEADER_NOT_AVAILABLE|no leader for this topic-partition/i.test(`${(e as { type?: string }).type ?? ''} ${e.message}`));
}

/**
 * A broker asked as a partition's leader that is not (yet, or any more) its leader: metadata and
 * the brokers' own state disagree for a moment after an election — a topic created a moment ago,
 * a broker back from a pause. KafkaJS's admin gives up on it at once; asking again shortly works.
 */
export function isNotLeader(err: unknown): boolean {
  return anyCause(err, (e) =>
    /NOT_LEADER_(FOR_PARTITION|OR_FOLLOWER)|not the leader for that topic-partition/i.test(`${(e as { type?: string }).type ?? ''} ${e.message}`),
  );
}

/** A partition whose leadership is changing: worth reading again shortly. */
export function isLeaderMoving(err: unknown): boolean {
  return isNotLeader(err) || isLeaderNotAvailable(err);
}

/** A group coordinator that moved or is still loading (a fresh or restarted broker): worth asking again shortly. */
export function isCoordinatorMoving(err: unknown): boolean {
  const type = (err as { type?: unknown } | null)?.type;
  // KafkaJS names them after the protocol's older names (codes 14, 15, 16).
  return (
    type === 'NOT_COORDINATOR' ||
    type === 'NOT_COORDINATOR_FOR_GROUP' ||
    type === 'COORDINATOR_LOAD_IN_PROGRESS' ||
    type === 'GROUP_LOAD_IN_PROGRESS' ||
    type === 'COORDINATOR_NOT_AVAILABLE' ||
    type === 'GROUP_COORDINATOR_NOT_AVAILABLE'
  );
}
