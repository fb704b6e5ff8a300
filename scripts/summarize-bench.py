#!/usr/bin/python3
"""Turns the measurements that bench-vs-peers.sh records into one line per comparison:
    name ipuml=X peer=Y ratio=Z   (ratio > 1: ipuml is faster)

Input lines (tab-separated): round, side (ipuml|peer), name, unit (rate|ms), value.
A side that records several values for one name in one round keeps its best (the peer's best
thread count for MNIST). The machine's speed drifts over seconds, so each round runs both sides
back to back and yields one ratio; Z is the median of those per-round ratios, X and Y the medians
of each side's values."""
import statistics
import sys


def main():
    best = {}  # (name, side, round) -> value
    units, order = {}, []
    for line in sys.stdin:
        fields = line.rstrip("\n").split("\t")
        if len(fields) != 5 or not fields[4]:
            continue
        rnd, side, name, unit, value = fields
        value = float(value)
        if value <= 0:
            continue
        if name not in units:
            units[name] = unit
            order.append(name)
        key = (name, side, rnd)
        old = best.get(key)
        if old is None or (value > old if unit == "rate" else value < old):
            best[key] = value
    for name in order:
        unit = units[name]
        rounds = sorted({r for (n, s, r) in best if n == name})
        pairs = [(best[(name, "ipuml", r)], best[(name, "peer", r)]) for r in rounds
                 if (name, "ipuml", r) in best and (name, "peer", r) in best]
        if not pairs:
            print(f"{name} ipuml=missing peer=missing ratio=0")
            continue
        ratios = [(a / b) if unit == "rate" else (b / a) for a, b in pairs]
        ours = statistics.median(a for a, _ in pairs)
        theirs = statistics.median(b for _, b in pairs)
        digits = 1 if unit == "rate" else 2
        print(f"{name} ipuml={ours:.{digits}f} peer={theirs:.{digits}f} "
              f"ratio={statistics.median(ratios):.2f}")


if __name__ == "__main__":
    main()
