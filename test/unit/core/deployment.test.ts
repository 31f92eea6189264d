import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { DEPLOYMENT_SETTINGS, judge, NOT_SET, unclaimed, type DeploymentSetting, type DeploymentView, type RecordState } from '../../../src/core/deployment.js';

const ZK = 'zookeeper /idmint/snowflake';
const record = (values: DeploymentView, ever: DeploymentSetting[] = Object.keys(values) as DeploymentSetting[]): RecordState => ({
  values,
  ever: new Set(ever),
});

describe('the deployment record judged against a process (issue 39)', () => {
  it('a process that agrees has no difference, and one that uses a setting it does not have is not judged on it', () => {
    const values: DeploymentView = { 'worker-id-registry': ZK, 'segment-fence': 'zookeeper /idmint/fence', region: 'single' };
    expect(judge(record(values), values)).toEqual([]);
    expect(judge(record(values), { 'segment-fence': 'zookeeper /idmint/fence' })).toEqual([]);
  });

  it('another worker-id registry closes Snowflake IDs, naming the variables to fix', () => {
    const [d] = judge(record({ 'worker-id-registry': ZK }), { 'worker-id-registry': 'postgres' });
    expect(d).toMatchObject({ setting: 'worker-id-registry', closes: ['snowflake'], vanished: false });
    expect(d!.message).toContain('ZK_CONNECT');
  });

  it('no fence where the deployment fences closes new segments; a fence where it does not breaks nothing', () => {
    expect(judge(record({ 'segment-fence': 'zookeeper /idmint/fence' }), { 'segment-fence': 'off' })[0]?.closes).toEqual(['segments']);
    const [looser] = judge(record({ 'segment-fence': 'off' }), { 'segment-fence': 'zookeeper /idmint/fence' });
    expect(looser?.closes).toEqual([]);
  });

  it('another region split closes the generators whose worker ids carry it (Snowflake, uid), never segments', () => {
    expect(judge(record({ region: 'region 0 of 2, stripe 1000000' }), { region: 'single' })[0]?.closes).toEqual(['snowflake', 'uid']);
  });

  it('a setting recorded once and removed is never claimed again: a process that held it keeps serving, a newcomer refuses', () => {
    const gone = record({}, ['obfuscation-key-fingerprint']);
    const mine = { 'obfuscation-key-fingerprint': 'abc' };
    expect(unclaimed(gone, mine)).toEqual({});
    const [held] = judge(gone, mine, { 'obfuscation-key-fingerprint': 'abc' });
    expect(held).toMatchObject({ vanished: true, closes: [] });
    const [newcomer] = judge(gone, mine, {});
    expect(newcomer).toMatchObject({ vanished: true, closes: ['obfuscated'] });
    expect(newcomer!.message).toContain('IDMINT_OBFUSCATION_KEY');
  });

  it('a process without a key is judged only against a recorded key, and never records "not set"', () => {
    expect(judge(record({}), { 'obfuscation-key-fingerprint': NOT_SET })).toEqual([]);
    expect(unclaimed(record({}), { 'obfuscation-key-fingerprint': NOT_SET })).toEqual({});
    expect(judge(record({ 'obfuscation-key-fingerprint': 'abc' }), { 'obfuscation-key-fingerprint': NOT_SET })[0]?.closes).toEqual(['obfuscated']);
  });

  it('property: whatever the record and the view, a setting whose value differs from a recorded one is a difference, and equal ones never are', () => {
    const value = fc.constantFrom('a', 'b', 'c');
    const view = fc.dictionary(fc.constantFrom(...DEPLOYMENT_SETTINGS), value) as fc.Arbitrary<DeploymentView>;
    fc.assert(
      fc.property(view, view, (recorded, mine) => {
        const found = new Set(judge(record(recorded), mine).map((d) => d.setting));
        for (const setting of DEPLOYMENT_SETTINGS) {
          const r = recorded[setting];
          const m = mine[setting];
          expect(found.has(setting)).toBe(m !== undefined && r !== undefined && r !== m);
        }
      }),
      { numRuns: 500 },
    );
  });
});
