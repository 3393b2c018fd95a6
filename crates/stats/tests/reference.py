"""Regenerates every reference figure quoted in the tests of tcplab-stats.

Run: pip install scipy numpy && python3 crates/stats/tests/reference.py
Recorded with scipy 1.17.1, numpy 2.4.6.
"""
import math
import numpy as np, scipy
from scipy import stats
print("scipy", scipy.__version__, "numpy", np.__version__)
a = np.array([0.28, 0.19, 0.75, 0.31, 0.22, 0.27, 0.25, 0.30, 0.24, 0.29])
print("summary", a.mean(), a.std(ddof=1), np.median(a), np.percentile(a, [90, 99, 99.9]))
print("p25", np.percentile(a, 25))
print("tci", stats.t.interval(0.95, len(a)-1, loc=a.mean(), scale=stats.sem(a)))
print("tci90", stats.t.interval(0.90, len(a)-1, loc=a.mean(), scale=stats.sem(a)))
for df in [1, 2, 5, 10, 30, 7.3]:
    print("tppf", df, stats.t.ppf(0.975, df), stats.t.sf(2.5, df))
b = np.array([0.35, 0.41, 0.38, 0.52, 0.33, 0.40, 0.37, 0.44])
for alt in ["two-sided", "less", "greater"]:
    r = stats.ttest_ind(a, b, equal_var=False, alternative=alt)
    print("welch", alt, r.statistic, r.df, r.pvalue)
# Mann-Whitney: asymptotic with ties
x = np.array([1, 2, 2, 3, 4, 4, 4, 5, 6, 7, 8, 9], float)
y = np.array([3, 4, 5, 5, 6, 7, 8, 8, 9, 10, 11, 12, 12], float)
for alt in ["two-sided", "less", "greater"]:
    r = stats.mannwhitneyu(x, y, alternative=alt, method="asymptotic")
    print("mwu_asym", alt, r.statistic, r.pvalue)
# exact small, no ties
xs = np.array([1.1, 2.3, 0.7, 3.9, 2.8])
ys = np.array([4.2, 3.3, 5.0, 4.8, 6.1, 2.9])
for alt in ["two-sided", "less", "greater"]:
    r = stats.mannwhitneyu(xs, ys, alternative=alt, method="exact")
    print("mwu_exact", alt, r.statistic, r.pvalue)
r = stats.mannwhitneyu(a, b, alternative="two-sided")
print("mwu_auto_ab", r.statistic, r.pvalue)

# --- bootstrap (tests/reference.rs, EXP40) ---
rng = np.random.default_rng(20261122)
x = np.round(rng.exponential(1.0, 40), 4)
print("data", ", ".join(repr(float(v)) for v in x))
print("median", np.median(x))
for stat, name in [(np.mean, "mean"), (np.median, "median")]:
    for method in ["percentile", "BCa"]:
        r = stats.bootstrap((x,), stat, method=method, n_resamples=100000, confidence_level=0.95, rng=1)
        print(name, method, r.confidence_interval.low, r.confidence_interval.high)

# --- speed-up and Holm ---
a = np.array([0.28, 0.19, 0.75, 0.31, 0.22, 0.27, 0.25, 0.30, 0.24, 0.29])  # candidate
b = np.array([0.35, 0.41, 0.38, 0.52, 0.33, 0.40, 0.37, 0.44])              # baseline
r = stats.bootstrap((b, a), lambda b, c, axis=-1: b.mean(axis=-1) / c.mean(axis=-1), method="percentile", n_resamples=100000, rng=3, vectorized=True)
print(b.mean()/a.mean(), r.confidence_interval)
# Holm (hand, same as statsmodels multipletests(method="holm"))
p = np.array([0.01, 0.04, 0.03, 0.005, 0.2])
o = np.argsort(p); m = len(p)
adj = np.maximum.accumulate(np.minimum(1, (m - np.arange(m)) * p[o]))
out = np.empty(m); out[o] = adj
print("holm", out)

# --- Wilson interval (tests/stalls.rs) ---
z = 1.959963984540054; n = 100; p = 0.3
c = (p + z*z/(2*n)) / (1 + z*z/n); h = z*math.sqrt(p*(1-p)/n + z*z/(4*n*n)) / (1 + z*z/n)
print("wilson", c - h, c + h)

# --- power of the one-sided t-test (tests/calibration.rs) ---
df = 18; nc = 1.5 * math.sqrt(10 / 2)
print("power", 1 - stats.nct.cdf(stats.t.ppf(0.95, df), df, nc))
