//! Per-thread CPU time, for stage timings that do not count time a thread was preempted.
//!
//! Reading a thread's CPU clock is a system call (about half a microsecond here, with a lock
//! in the scheduler), and an image sample's stages read it half a dozen times: nothing next
//! to a photo's milliseconds of decoding, but most of the work of a 32x32 image held in
//! memory. So a worker times whole samples by sampling ([`Sample::start`]): every sample while
//! samples cost more than [`TIMED_EVERY`] of CPU each, else one in `n` (`n` that keeps one
//! timed sample per [`TIMED_EVERY`] of work, at most [`MAX_PERIOD`]), its stage times counted
//! `n` times. The sums stay unbiased estimates of the stages' CPU time.

use std::cell::Cell;
use std::time::Duration;

/// Samples cheaper than this are timed one in several.
const TIMED_EVERY: Duration = Duration::from_millis(1);
/// At least one sample in this many is timed.
const MAX_PERIOD: u32 = 64;

/// A worker thread's sampling of its samples' stage times.
#[derive(Clone, Copy)]
struct Sampling {
    /// What a stage time read now counts for: 0 (this sample is not timed) or the number of
    /// samples it stands for.
    weight: u32,
    /// Samples to pass over before the next timed one.
    skip: u32,
    /// Samples begun since the last timed one, that one included.
    since: u32,
    /// The thread's CPU time when the last timed sample began (none yet: the next is timed).
    cpu_then: Option<Duration>,
}

thread_local! {
    static SAMPLING: Cell<Sampling> = const {
        Cell::new(Sampling {
            weight: 1,
            skip: 0,
            since: 0,
            cpu_then: None,
        })
    };
}

/// The calling thread's CPU time: what a stage cost, whether or not the thread was preempted
/// meanwhile (on 2 cores, the workers share them with the emulated engine's threads). Outside
/// a [`Sample`] every reading is real; inside one that is not timed, none is taken (and
/// differences are zero), inside a timed one differences count for the samples it stands for.
#[derive(Clone, Copy)]
pub(crate) struct CpuClock {
    at: Duration,
    weight: u32,
}

impl CpuClock {
    pub fn now() -> Self {
        let weight = SAMPLING.with(|s| s.get().weight);
        let at = if weight == 0 {
            Duration::ZERO
        } else {
            thread_cpu()
        };
        Self { at, weight }
    }

    pub fn elapsed(self) -> Duration {
        Self::now() - self
    }
}

impl std::ops::Sub for CpuClock {
    type Output = Duration;
    fn sub(self, earlier: Self) -> Duration {
        if self.weight == 0 || earlier.weight == 0 {
            return Duration::ZERO;
        }
        self.at.saturating_sub(earlier.at) * earlier.weight
    }
}

/// One image sample's work on a worker thread, timed or not (see the module's notes): the
/// stage clocks read while it lives follow its choice; dropped, every reading is real again.
pub(crate) struct Sample(());

impl Sample {
    pub fn start() -> Self {
        SAMPLING.with(|cell| {
            let mut s = cell.get();
            s.since += 1;
            if s.skip > 0 {
                s.skip -= 1;
                s.weight = 0;
            } else {
                let cpu = thread_cpu();
                let each = s
                    .cpu_then
                    .map_or(TIMED_EVERY, |then| cpu.saturating_sub(then) / s.since);
                let period = if each >= TIMED_EVERY {
                    1
                } else {
                    let fit = TIMED_EVERY.as_nanos() / each.as_nanos().max(1);
                    (fit as u32).clamp(1, MAX_PERIOD)
                };
                s = Sampling {
                    weight: period,
                    skip: period - 1,
                    since: 0,
                    cpu_then: Some(cpu),
                };
            }
            cell.set(s);
        });
        Self(())
    }
}

impl Drop for Sample {
    fn drop(&mut self) {
        SAMPLING.with(|cell| {
            let mut s = cell.get();
            s.weight = 1;
            cell.set(s);
        });
    }
}

fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given; CLOCK_THREAD_CPUTIME_ID is
    // always available on Linux. On failure `ts` stays zero (stage times read as zero).
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Spends about `d` of this thread's CPU time.
    fn spin(d: Duration) {
        let start = thread_cpu();
        while thread_cpu() - start < d {
            std::hint::black_box(0u64);
        }
    }

    #[test]
    fn costly_samples_are_each_timed_and_cheap_ones_one_in_several_counted_as_many() {
        // A fresh thread: its own sampling state.
        std::thread::spawn(|| {
            // Costly samples: every one timed, each counted once.
            for _ in 0..3 {
                let _s = Sample::start();
                let t = CpuClock::now();
                spin(TIMED_EVERY * 2);
                let d = t.elapsed();
                assert!(d >= TIMED_EVERY * 2 && d < TIMED_EVERY * 20, "{d:?}");
            }
            // Cheap samples: once the thread sees they are, most are not timed, and the
            // stage times of those that are, summed, estimate the whole.
            let (mut timed, mut total) = (0, Duration::ZERO);
            let work = Duration::from_micros(20);
            for _ in 0..2000 {
                let _s = Sample::start();
                let t = CpuClock::now();
                spin(work);
                let d = t.elapsed();
                timed += usize::from(d > Duration::ZERO);
                total += d;
            }
            assert!(timed < 200, "{timed} of 2000 timed");
            let whole = work * 2000;
            assert!(
                total > whole / 2 && total < whole * 4,
                "{total:?} for {whole:?}"
            );
            // Outside a sample, every reading is real.
            let t = CpuClock::now();
            spin(Duration::from_micros(200));
            assert!(t.elapsed() >= Duration::from_micros(200));
        })
        .join()
        .unwrap();
    }
}
