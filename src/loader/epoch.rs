//! One epoch's batches, in order: submitted to the workers `prefetch` ahead, collected as they
//! finish in any order, yielded in sequence; cancelled and drained when dropped mid-epoch.

use std::borrow::BorrowMut;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};

use super::batch::{self, BatchWork, Finished};
use super::state::Position;
use super::work::Job;
use super::{Batch, Loader, LoaderState, OnError, OutputSize, KEPT_SKIPS};
use crate::hpu::{DeviceTensor, Dtype, Layout};
use crate::sampler::Sampler;
use crate::tensor::Placement;
use crate::Error;

/// The batches of one epoch, in order, over a borrowed loader (see [`Loader::epoch`]).
pub type Epoch<'a> = EpochOf<&'a mut Loader>;

/// The batches of one epoch, in order. `L` is how the iterator holds its loader: borrowed
/// ([`Epoch`]) or owned ([`Loader::into_epoch`]). Dropping it mid-epoch cancels the outstanding
/// work and waits for it (bounded by the samples being decoded at that moment).
pub struct EpochOf<L: BorrowMut<Loader>> {
    /// Always `Some` until [`EpochOf::into_loader`] takes it.
    loader: Option<L>,
    epoch: u64,
    order: Arc<Vec<u32>>,
    /// This epoch's batch planning: the loader's sampler, or one over a given order.
    sampler: Box<Sampler>,
    /// The global position of the order from which this epoch's batches are planned (0, or
    /// where a resume on another world size or rank picked the epoch up).
    plan_start: usize,
    total: usize,
    next_submit: usize,
    next_yield: usize,
    outstanding: usize,
    ready: BTreeMap<usize, Result<Batch, Error>>,
    done_tx: Sender<Finished>,
    done_rx: Receiver<Finished>,
    cancel: Arc<AtomicBool>,
    /// Held by each of the epoch's batches while it is being filled (see [`BatchWork`]).
    batches: Arc<()>,
    skipped: usize,
    budget: usize,
    finished: bool,
}

impl<L: BorrowMut<Loader>> EpochOf<L> {
    pub(super) fn start(mut loader: L, epoch: u64, given: Option<Vec<u32>>) -> Self {
        let l = loader.borrow_mut();
        let (sampler, order) = match given {
            Some(order) => (l.sampler.with_len(order.len()), order),
            None => {
                let order = l
                    .sampler
                    .shuffle
                    .and_then(|seed| l.shared.source.shuffled_order(seed, epoch))
                    .filter(|o| o.len() == l.sampler.len)
                    .unwrap_or_else(|| l.sampler.epoch_order(epoch));
                (l.sampler.clone(), order)
            }
        };
        let start = match l.resume.take() {
            Some(p) if p.epoch == epoch => p,
            _ => Position::epoch_start(epoch),
        };
        let total = sampler.batches_from(start.start);
        l.shared.source.plan_reads(
            &mut (start.step..total).flat_map(|b| sampler.batch(&order, start.start, b).indices),
        );
        let (done_tx, done_rx) = crossbeam_channel::unbounded();
        let budget = match l.shared.on_error {
            OnError::Skip => {
                ((sampler.positions_per_rank() as f64 * l.error_budget).ceil() as usize).max(1)
            }
            OnError::Fail => 0,
        };
        Self {
            order: Arc::new(order),
            plan_start: start.start,
            total,
            sampler: Box::new(sampler),
            loader: Some(loader),
            epoch,
            next_submit: start.step,
            next_yield: start.step,
            outstanding: 0,
            ready: BTreeMap::new(),
            done_tx,
            done_rx,
            cancel: Arc::new(AtomicBool::new(false)),
            batches: Arc::new(()),
            skipped: start.skipped,
            budget,
            finished: false,
        }
    }

    /// The loader this epoch runs on (its settings, report and state).
    pub fn loader(&self) -> &Loader {
        self.loader
            .as_ref()
            .expect("present until into_loader")
            .borrow()
    }

    fn loader_mut(&mut self) -> &mut Loader {
        self.loader
            .as_mut()
            .expect("present until into_loader")
            .borrow_mut()
    }

    /// Cancels what is still outstanding, waits for it, and gives the loader back. The loader's
    /// state is that after the last batch yielded.
    pub fn into_loader(mut self) -> L {
        self.cancel_and_wait();
        self.loader.take().expect("present until into_loader")
    }

    /// The epoch number.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Batches in this epoch, counting from step 0 (a resumed epoch yields the ones from its
    /// start step on). An epoch resumed on another world size or rank counts its batches over
    /// the positions no rank had seen, so it has fewer.
    pub fn total(&self) -> usize {
        self.total
    }

    /// The loader's state after the batch yielded last; see [`Loader::state`].
    pub fn state(&self) -> LoaderState {
        self.loader().state()
    }

    fn submit(&mut self, seq: usize) -> Result<(), Error> {
        let loader = self.loader();
        let plan = self.sampler.batch(&self.order, self.plan_start, seq);
        loader.shared.source.prefetch(&plan.indices);
        let n = plan.indices.len();
        let images = loader.hpu.alloc(n * loader.shared.layout.sample_bytes)?;
        let label_bytes = loader.shared.layout.label_bytes;
        let labels = loader.hpu.alloc(n * label_bytes)?;
        let buffer = match loader.placement {
            Placement::Device => loader.pool.take(),
            Placement::Host => loader
                .pool
                .take_or_grow()
                .map_err(|source| Error::HostMemory {
                    what: "pinned batch buffers",
                    source,
                })?,
        };
        let frame = match (loader.output, loader.layout) {
            // Several views of different sizes: a flat row per sample.
            _ if !loader.shared.views.is_empty() => {
                vec![loader.shared.layout.sample_bytes / loader.dtype.size()]
            }
            (OutputSize::Fixed([h, w]), Layout::Nchw) => {
                vec![loader.shared.stage.channels(), h as usize, w as usize]
            }
            (OutputSize::Fixed([h, w]), Layout::Nhwc) => {
                vec![h as usize, w as usize, loader.shared.stage.channels()]
            }
            (OutputSize::PerSample { .. }, _) => {
                vec![loader.shared.layout.sample_bytes / loader.dtype.size()]
            }
        };
        let shape: Vec<usize> = match &loader.sample_shape {
            Some(sample) => std::iter::once(n).chain(sample.iter().copied()).collect(),
            None => std::iter::once(n).chain(frame).collect(),
        };
        let work = BatchWork::new(
            batch::BatchSpec {
                seq,
                epoch: self.epoch,
                plan,
                buffer,
                images: DeviceTensor::new(images, shape, loader.dtype),
                labels: match loader.shared.targets {
                    None => DeviceTensor::new(labels, vec![n], Dtype::I64),
                    Some(_) => DeviceTensor::new(labels, vec![n, label_bytes], Dtype::U8),
                },
                cancel: Arc::clone(&self.cancel),
                live: Arc::clone(&self.batches),
                done: self.done_tx.clone(),
                pool: loader.pool.returner(),
                hpu: loader.hpu.clone(),
                placement: loader.placement,
            },
            loader.shared.layout,
        );
        let jobs = loader
            .jobs
            .as_ref()
            .expect("jobs channel lives as long as the loader");
        for slot in 0..n {
            jobs.send(Job {
                batch: Arc::clone(&work),
                slot,
            })
            .map_err(|_| Error::WorkerLost)?;
        }
        self.outstanding += 1;
        Ok(())
    }

    /// Submits the batches up to `last` (inclusive) not submitted yet.
    fn submit_to(&mut self, last: usize) -> Result<(), Error> {
        while self.next_submit <= last {
            self.submit(self.next_submit)?;
            self.next_submit += 1;
        }
        Ok(())
    }

    fn wait_for(&mut self, seq: usize, stop: &mut dyn FnMut() -> bool) -> Result<Batch, Error> {
        loop {
            if let Some(r) = self.ready.remove(&seq) {
                return r;
            }
            match self.done_rx.recv_timeout(POLL) {
                Ok(f) => {
                    self.outstanding -= 1;
                    self.ready.insert(f.seq, f.result);
                }
                Err(_) if self.loader().live_workers() < self.loader().workers.len() => {
                    return Err(Error::WorkerLost)
                }
                Err(_) if stop() => return Err(Error::Interrupted),
                Err(_) => {}
            }
        }
    }

    fn record(&mut self, batch: &Batch) {
        let mut r = self
            .loader()
            .report
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        r.batches += 1;
        r.images += batch.valid as u64;
        r.skipped += batch.skipped.len() as u64;
        for s in &batch.skipped {
            *r.skipped_by_reason.entry(s.reason.to_string()).or_default() += 1;
            if r.skips.len() < KEPT_SKIPS {
                r.skips.push(s.clone());
            }
        }
        drop(r);
        self.skipped += batch.skipped.len();
    }
}

impl<L: BorrowMut<Loader>> EpochOf<L> {
    /// [`Iterator::next`] that gives up waiting when `stop` says so: `stop` is asked every
    /// 25 ms while the next batch is not ready (a binding checks for Ctrl-C there). Stopping
    /// yields [`Error::Interrupted`] and ends the epoch; the loader's state stays that after the
    /// last batch yielded, so the epoch can be resumed.
    pub fn next_or_stop(&mut self, mut stop: impl FnMut() -> bool) -> Option<Result<Batch, Error>> {
        if self.finished || self.next_yield >= self.total {
            self.finished = true;
            return None;
        }
        // An epoch's first batch runs alone: the batches after it are submitted when it is done,
        // so their reads, routing and first-touch page faults do not take the cores from it
        // (with the DMA in parts, batch.rs, its time from build() fell from 0.16 to 0.10 s on
        // 2 cores, at the same images/s).
        // The source hears of them now, so that remote reads still start early.
        let first = self.next_submit == self.next_yield;
        let wanted = (self.next_yield + self.loader().prefetch).min(self.total - 1);
        if first {
            let loader = self.loader();
            for seq in self.next_yield + 1..=wanted {
                let plan = self.sampler.batch(&self.order, self.plan_start, seq);
                loader.shared.source.prefetch(&plan.indices);
            }
        }
        if let Err(e) = self.submit_to(if first { self.next_yield } else { wanted }) {
            self.finished = true;
            return Some(Err(e));
        }
        let t = Instant::now();
        let result = self.wait_for(self.next_yield, &mut stop);
        self.loader_mut().wait += t.elapsed();
        if let Err(Error::Interrupted) = result {
            self.finished = true;
            return Some(result);
        }
        self.next_yield += 1;
        // The prefetch starts before the first batch is handed over, not at the next call,
        // which comes after the caller's step; it is as deep as it would have been. A batch
        // that cannot be submitted now is submitted (and its error reported) by that call.
        if first && result.is_ok() {
            let _ = self.submit_to(wanted);
        }
        let result = result.and_then(|batch| {
            self.record(&batch);
            let position = if self.next_yield == self.total {
                Position::epoch_start(self.epoch + 1)
            } else {
                Position {
                    epoch: self.epoch,
                    start: self.plan_start,
                    step: self.next_yield,
                    skipped: self.skipped,
                }
            };
            self.loader_mut().position = position;
            if self.skipped > self.budget {
                let last = batch.skipped.last().expect("this batch crossed the budget");
                return Err(Error::ErrorBudget {
                    skipped: self.skipped,
                    budget: self.budget,
                    last: last.message.clone(),
                });
            }
            Ok(batch)
        });
        if result.is_err() {
            self.finished = true;
        }
        Some(result)
    }
}

/// How often a wait for a batch checks worker liveness and the caller's stop request.
const POLL: Duration = Duration::from_millis(25);
/// How long an ended epoch waits for its batches' last handles to go.
const SETTLE: Duration = Duration::from_secs(1);

impl<L: BorrowMut<Loader>> Iterator for EpochOf<L> {
    type Item = Result<Batch, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_or_stop(|| false)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = if self.finished {
            0
        } else {
            self.total - self.next_yield
        };
        (0, Some(left))
    }
}

impl<L: BorrowMut<Loader>> EpochOf<L> {
    fn cancel_and_wait(&mut self) {
        if self.loader.is_none() {
            return;
        }
        self.cancel.store(true, Ordering::Relaxed);
        while self.outstanding > 0 {
            match self.done_rx.recv_timeout(POLL) {
                Ok(_) => self.outstanding -= 1,
                Err(_) if self.loader().live_workers() < self.loader().workers.len() => break,
                Err(_) => {}
            }
        }
        // Finished batches nobody will take give their buffers back now.
        self.ready.clear();
        // A batch is sent from the thread that ends its last job, which lets go of its own
        // handle on the batch's work (and so on the device tensors it holds) a moment later.
        // Wait for that too, so that the device memory of every batch the user has dropped is
        // free once the epoch is; bounded, for a thread that died holding one.
        let deadline = Instant::now() + SETTLE;
        while Arc::strong_count(&self.batches) > 1 && Instant::now() < deadline {
            std::thread::yield_now();
        }
    }
}

impl<L: BorrowMut<Loader>> Drop for EpochOf<L> {
    fn drop(&mut self) {
        self.cancel_and_wait();
    }
}
