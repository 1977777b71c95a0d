/** The dashboard's reading of /metrics text: parsing, bucket deltas and quantiles as Prometheus computes them. */
import { describe, expect, it } from 'vitest';
import { Scrape, bucketDelta, parsePrometheus, quantile } from '../../packages/web/src/prometheus.js';

describe('parsePrometheus', () => {
  it('reads samples with labels (escapes included) and skips comments', () => {
    const text = [
      '# HELP x_total help text',
      '# TYPE x_total counter',
      'x_total{code="proto"} 3',
      'x_total{code="a\\"b\\\\c\\nd",other="1"} 4',
      'h_bucket{le="+Inf"} 7',
      'plain 1.5e-3',
      '',
    ].join('\n');
    expect(parsePrometheus(text)).toEqual([
      { name: 'x_total', labels: { code: 'proto' }, value: 3 },
      { name: 'x_total', labels: { code: 'a"b\\c\nd', other: '1' }, value: 4 },
      { name: 'h_bucket', labels: { le: '+Inf' }, value: 7 },
      { name: 'plain', labels: {}, value: 0.0015 },
    ]);
  });

  it('sums matching series and reads histogram buckets, +Inf last', () => {
    const s = new Scrape(0, parsePrometheus('a{k="1"} 2\na{k="2"} 3\nh_bucket{o="x",le="0.5"} 1\nh_bucket{o="x",le="+Inf"} 4\nh_bucket{o="y",le="0.5"} 2\nh_bucket{o="y",le="+Inf"} 2'));
    expect(s.value('a')).toBe(5);
    expect(s.value('a', { k: '2' })).toBe(3);
    expect(s.buckets('h', { o: 'x' })).toEqual([{ le: 0.5, count: 1 }, { le: Infinity, count: 4 }]);
    expect(s.buckets('h')).toEqual([{ le: 0.5, count: 3 }, { le: Infinity, count: 6 }]);
  });
});

describe('quantile', () => {
  const buckets = [
    { le: 1, count: 5 },
    { le: 2, count: 10 },
    { le: 4, count: 10 },
    { le: Infinity, count: 10 },
  ];

  it('interpolates inside the bucket that holds the rank', () => {
    expect(quantile(0.5, buckets)).toBe(1);
    expect(quantile(0.25, buckets)).toBe(0.5);
    expect(quantile(0.75, buckets)).toBe(1.5);
    expect(quantile(1, buckets)).toBe(2);
  });

  it('gives the highest finite bound for ranks in +Inf, and nothing without observations', () => {
    expect(quantile(0.99, [{ le: 1, count: 1 }, { le: Infinity, count: 10 }])).toBe(1);
    expect(quantile(0.5, [{ le: 1, count: 0 }, { le: Infinity, count: 0 }])).toBeUndefined();
  });

  it('works on the observations between two scrapes', () => {
    const before = [{ le: 1, count: 5 }, { le: Infinity, count: 5 }];
    const now = [{ le: 1, count: 5 }, { le: Infinity, count: 9 }];
    expect(bucketDelta(now, before)).toEqual([{ le: 1, count: 0 }, { le: Infinity, count: 4 }]);
  });
});
