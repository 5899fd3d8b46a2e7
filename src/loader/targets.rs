//! A detection sample's targets in its label slot: a record of fixed size, so that every
//! batch has the same shapes (graph-mode bridges recompile for each new shape).
//!
//! For `max_boxes` = M, native-endian:
//!
//! | offset | field |
//! |---|---|
//! | 0 | `image_id`: i64 |
//! | 8 | `count`: i64, the boxes kept (at most M) |
//! | 16 | `height`, `width`: i32 each, the image's size at the output |
//! | 24 | `boxes`: f32 `[M][4]`, `[x1, y1, x2, y2]` in output pixels; zeros past `count` |
//! | 24 + 16M | `labels`: i64 `[M]`; -1 past `count` |
//! | 24 + 24M | `valid`: u8 `[M]`; 1 for the first `count`, 0 after |
//!
//! and zeros up to a multiple of 8 bytes. Padding can never pass for a box: `valid` is 0 and
//! the label -1 there, and `count` says where it starts.

/// Where each field of a target record lies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TargetLayout {
    /// Boxes per record (Gaudi's SSD pads to 200).
    pub max_boxes: usize,
}

/// One sample's targets, read back from its record.
#[derive(Clone, Debug, PartialEq)]
pub struct Targets {
    /// The image's COCO id.
    pub image_id: i64,
    /// The image's `(height, width)` at the output.
    pub size: (u32, u32),
    /// `[x1, y1, x2, y2]` in output pixels, per kept box.
    pub boxes: Vec<[f32; 4]>,
    /// The label per kept box.
    pub labels: Vec<i64>,
}

impl TargetLayout {
    /// Where the boxes start.
    pub fn boxes_at(&self) -> usize {
        24
    }
    /// Where the labels start.
    pub fn labels_at(&self) -> usize {
        24 + 16 * self.max_boxes
    }
    /// Where the validity bytes start.
    pub fn valid_at(&self) -> usize {
        24 + 24 * self.max_boxes
    }
    /// Bytes per record.
    pub fn bytes(&self) -> usize {
        (self.valid_at() + self.max_boxes).next_multiple_of(8)
    }

    /// Writes a record into `record` (exactly [`bytes`](Self::bytes) long) for an image of
    /// `size` `(height, width)`; returns how many boxes did not fit (past `max_boxes`, in
    /// order).
    pub fn write(
        &self,
        record: &mut [u8],
        image_id: i64,
        size: (u32, u32),
        boxes: &[[f32; 4]],
        labels: impl Iterator<Item = i64>,
    ) -> usize {
        let m = self.max_boxes;
        let n = boxes.len().min(m);
        record.fill(0);
        record[..8].copy_from_slice(&image_id.to_ne_bytes());
        record[8..16].copy_from_slice(&(n as i64).to_ne_bytes());
        // Sizes are below 2^31: a decoder's limits bound every image and canvas.
        record[16..20].copy_from_slice(&(size.0 as i32).to_ne_bytes());
        record[20..24].copy_from_slice(&(size.1 as i32).to_ne_bytes());
        for (k, b) in boxes[..n].iter().enumerate() {
            for (c, v) in b.iter().enumerate() {
                let at = self.boxes_at() + (k * 4 + c) * 4;
                record[at..at + 4].copy_from_slice(&v.to_ne_bytes());
            }
        }
        let mut labels = labels.take(n).chain(std::iter::repeat(-1));
        for k in 0..m {
            let at = self.labels_at() + k * 8;
            let label = labels.next().unwrap_or(-1);
            record[at..at + 8].copy_from_slice(&label.to_ne_bytes());
        }
        record[self.valid_at()..self.valid_at() + n].fill(1);
        boxes.len() - n
    }

    /// Reads a record back.
    ///
    /// # Panics
    /// `record` is shorter than [`bytes`](Self::bytes).
    pub fn read(&self, record: &[u8]) -> Targets {
        let i64_at = |at: usize| i64::from_ne_bytes(record[at..at + 8].try_into().unwrap());
        let f32_at = |at: usize| f32::from_ne_bytes(record[at..at + 4].try_into().unwrap());
        let u32_at = |at: usize| u32::from_ne_bytes(record[at..at + 4].try_into().unwrap());
        let n = usize::try_from(i64_at(8)).unwrap_or(0).min(self.max_boxes);
        Targets {
            image_id: i64_at(0),
            size: (u32_at(16), u32_at(20)),
            boxes: (0..n)
                .map(|k| std::array::from_fn(|c| f32_at(self.boxes_at() + (k * 4 + c) * 4)))
                .collect(),
            labels: (0..n).map(|k| i64_at(self.labels_at() + k * 8)).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_reads_back_and_its_padding_is_marked_invalid() {
        let layout = TargetLayout { max_boxes: 3 };
        assert_eq!(layout.bytes(), 24 + 48 + 24 + 8);
        let mut record = vec![0xAB; layout.bytes()];
        let boxes = [[1.0, 2.0, 3.0, 4.0], [5.5, 6.0, 7.0, 8.0]];
        let left = layout.write(&mut record, 42, (30, 50), &boxes, [7, 9].into_iter());
        assert_eq!(left, 0);
        let t = layout.read(&record);
        assert_eq!(t.image_id, 42);
        assert_eq!(t.size, (30, 50));
        assert_eq!(t.boxes, boxes);
        assert_eq!(t.labels, [7, 9]);
        assert_eq!(&record[layout.valid_at()..layout.valid_at() + 3], [1, 1, 0]);
        let third = layout.labels_at() + 16;
        assert_eq!(
            i64::from_ne_bytes(record[third..third + 8].try_into().unwrap()),
            -1
        );
    }

    #[test]
    fn boxes_past_the_maximum_are_counted_not_written() {
        let layout = TargetLayout { max_boxes: 1 };
        let mut record = vec![0; layout.bytes()];
        let boxes = [[0.0; 4], [1.0; 4], [2.0; 4]];
        assert_eq!(
            layout.write(&mut record, 1, (1, 1), &boxes, [1, 2, 3].into_iter()),
            2
        );
        assert_eq!(layout.read(&record).labels, [1]);
    }
}
