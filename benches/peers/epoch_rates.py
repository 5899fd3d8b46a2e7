"""The epoch loop the peers share: one warm-up epoch, then the measured ones."""

import statistics
import time


def clip_rates(epochs, run_epoch, unit="clips"):
    """Runs `run_epoch()` (it loads one epoch and returns how many clips, or other `unit`s)
    once to warm up, then `epochs` times; prints each epoch's rate and the median of the
    measured ones."""
    rates = []
    for epoch in range(epochs + 1):
        t = time.perf_counter()
        rate = run_epoch() / (time.perf_counter() - t)
        print(f"epoch {epoch}{' (warm-up)' if epoch == 0 else ''}: {rate:.1f} {unit}/s")
        if epoch:
            rates.append(rate)
    print(f"{unit}/s: {statistics.median(rates):.1f} (median of {epochs})")
