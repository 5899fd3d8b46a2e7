//! Per-thread CPU time, for stage timings that do not count time a thread was preempted.

use std::time::Duration;

/// The calling thread's CPU time: what a stage cost, whether or not the thread was preempted
/// meanwhile (on 2 cores, the workers share them with the emulated engine's threads).
#[derive(Clone, Copy)]
pub(crate) struct CpuClock(Duration);

impl CpuClock {
    pub fn now() -> Self {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes the timespec it is given; CLOCK_THREAD_CPUTIME_ID is
        // always available on Linux. On failure `ts` stays zero (stage times read as zero).
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        Self(Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
    }

    pub fn elapsed(self) -> Duration {
        Self::now() - self
    }
}

impl std::ops::Sub for CpuClock {
    type Output = Duration;
    fn sub(self, earlier: Self) -> Duration {
        self.0.saturating_sub(earlier.0)
    }
}
