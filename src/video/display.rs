//! How a video's frames are shown: the display matrix of its track (MP4's `tkhd`, after the
//! movie's `mvhd`), which phones write to record a video held on its side as it was filmed,
//! and the quarter turns that show its frames upright.
//!
//! torchcodec (and with it torchvision's video datasets) and decord turn each frame by it;
//! PyAV and FFmpeg's decoder alone do not. hpuload turns them as torchcodec does: the matrices
//! combined as FFmpeg's MP4 reader combines them, the angle FFmpeg reads from the result
//! (`av_display_rotation_get`), rounded to the nearest quarter turn, and the frame turned
//! after its conversion to RGB (as `torch.rot90`), so every pixel is the one torchcodec gives.

use super::mp4::VideoError;

/// The identity display matrix (16.16 fixed point, the last column 2.30).
const IDENTITY: [i32; 9] = [1 << 16, 0, 0, 0, 1 << 16, 0, 0, 0, 1 << 30];

/// How a video is shown: what its display matrix asks for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Display {
    /// Quarter turns counterclockwise that show the frames upright (0 to 3), as torchcodec
    /// turns them.
    pub turns: u8,
    /// The track has a display matrix other than the identity (whatever it asks for).
    pub matrix: bool,
}

impl Display {
    /// The display of a track whose `tkhd` matrix is `track` in a movie whose `mvhd` matrix
    /// is `movie` (both row by row, as stored: `a b u c d v x y w`).
    pub fn from_matrices(track: [i32; 9], movie: [i32; 9]) -> Self {
        // The track's matrix times the movie's, each term shifted back by the fixed point of
        // its row of the movie's (16.16, 16.16, 2.30), summed in 32 bits as FFmpeg sums them.
        const SHIFT: [u32; 3] = [16, 16, 30];
        let mut shown = [0i32; 9];
        for i in 0..3 {
            for j in 0..3 {
                shown[i * 3 + j] = (0..3).fold(0i32, |sum, e| {
                    let term =
                        (i64::from(track[i * 3 + e]) * i64::from(movie[e * 3 + j])) >> SHIFT[e];
                    (i64::from(sum) + term) as i32
                });
            }
        }
        if shown == IDENTITY {
            return Self::default();
        }
        Self {
            turns: rotation_degrees(&shown).map_or(0, quarter_turns),
            matrix: true,
        }
    }

    /// The shown frame's width and height, for a frame coded `size` (width, height).
    pub fn size(self, (width, height): (u32, u32)) -> (u32, u32) {
        if self.turns % 2 == 1 {
            (height, width)
        } else {
            (width, height)
        }
    }
}

/// The angle (degrees, counterclockwise as FFmpeg's `av_display_rotation_get` gives it: -90
/// for a frame to be shown turned a quarter clockwise) of a display matrix; `None` for a
/// degenerate one.
fn rotation_degrees(m: &[i32; 9]) -> Option<f64> {
    let fixed = |v: i32| f64::from(v) / 65536.0;
    let x = fixed(m[0]).hypot(fixed(m[3]));
    let y = fixed(m[1]).hypot(fixed(m[4]));
    if x == 0.0 || y == 0.0 {
        return None;
    }
    Some(-((fixed(m[1]) / y).atan2(fixed(m[0]) / x) * 180.0 / std::f64::consts::PI))
}

/// torchcodec's quarter turns for an angle: rounded to the nearest multiple of 90 degrees;
/// +90 turns counterclockwise (`torch.rot90`'s k = 1), -90 clockwise (k = 3), 180 both ways.
fn quarter_turns(degrees: f64) -> u8 {
    match (degrees / 90.0).round() as i64 {
        1 => 1,
        -1 => 3,
        2 | -2 => 2,
        _ => 0,
    }
}

/// The `mvhd` matrix of the movie in `head` (its `ftyp` and `moov` boxes); the zero matrix
/// when it has none, as FFmpeg takes it then.
pub(super) fn movie_matrix(head: &[u8]) -> Result<[i32; 9], VideoError> {
    for (kind, moov) in super::fragments::children(head)? {
        if &kind != b"moov" {
            continue;
        }
        for (kind, mvhd) in super::fragments::children(moov)? {
            if &kind != b"mvhd" {
                continue;
            }
            // Version and flags; the times, timescale and duration (32 or 64 bits); rate,
            // volume and reserved; then the matrix.
            let at = match mvhd.first() {
                Some(1) => 4 + 28 + 16,
                _ => 4 + 16 + 16,
            };
            let Some(bytes) = mvhd.get(at..at + 36) else {
                return Err(VideoError::Moov(
                    "`mvhd` is cut off before its matrix".into(),
                ));
            };
            let mut matrix = [0i32; 9];
            for (v, b) in matrix.iter_mut().zip(bytes.chunks_exact(4)) {
                *v = i32::from_be_bytes(b.try_into().expect("4 bytes"));
            }
            return Ok(matrix);
        }
    }
    Ok([0; 9])
}

/// Writes the RGB frame `rgb` (`width` x `height`) turned `turns` quarter turns
/// counterclockwise into `out` (as `torch.rot90(frame, turns, (0, 1))` on `[H, W, C]`).
pub fn turn(rgb: &[u8], (width, height): (usize, usize), turns: u8, out: &mut Vec<u8>) {
    out.clear();
    out.reserve(rgb.len());
    let at = |x: usize, y: usize| &rgb[(y * width + x) * 3..(y * width + x) * 3 + 3];
    match turns % 4 {
        0 => out.extend_from_slice(rgb),
        // Row `i` of a quarter turn counterclockwise is column `width - 1 - i`, top down.
        1 => (0..width).rev().for_each(|x| {
            (0..height).for_each(|y| out.extend_from_slice(at(x, y)));
        }),
        2 => (0..height).rev().for_each(|y| {
            (0..width)
                .rev()
                .for_each(|x| out.extend_from_slice(at(x, y)));
        }),
        // Clockwise: row `i` is column `i`, bottom up.
        _ => (0..width).for_each(|x| {
            (0..height)
                .rev()
                .for_each(|y| out.extend_from_slice(at(x, y)));
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const F: i32 = 1 << 16;

    fn matrix(a: i32, b: i32, c: i32, d: i32) -> [i32; 9] {
        [a, b, 0, c, d, 0, 0, 0, 1 << 30]
    }

    #[test]
    fn the_quarter_turns_are_ffmpegs_angle_rounded_as_torchcodec_rounds_it() {
        let shown = |track| Display::from_matrices(track, IDENTITY);
        // FFmpeg reads -90 degrees from (0 1 / -1 0): torchcodec turns it clockwise.
        assert_eq!(
            shown(matrix(0, F, -F, 0)),
            Display {
                turns: 3,
                matrix: true
            }
        );
        assert_eq!(
            shown(matrix(0, -F, F, 0)),
            Display {
                turns: 1,
                matrix: true
            }
        );
        assert_eq!(
            shown(matrix(-F, 0, 0, -F)),
            Display {
                turns: 2,
                matrix: true
            }
        );
        assert_eq!(shown(IDENTITY), Display::default());
        // A matrix that scales but does not turn, and one a few degrees off a quarter turn.
        assert_eq!(
            shown(matrix(2 * F, 0, 0, 2 * F)),
            Display {
                turns: 0,
                matrix: true
            }
        );
        let (s, c) = (80f64.to_radians().sin(), 80f64.to_radians().cos());
        let (s, c) = ((s * 65536.0) as i32, (c * 65536.0) as i32);
        assert_eq!(shown(matrix(c, s, -s, c)).turns, 3);
        // A degenerate matrix turns nothing, as FFmpeg reads no angle from it.
        assert_eq!(
            shown([0; 9]),
            Display {
                turns: 0,
                matrix: true
            }
        );
    }

    #[test]
    fn the_movies_matrix_applies_after_the_tracks() {
        // A track turned a quarter one way in a movie turned a quarter the other way: upright.
        let upright = Display::from_matrices(matrix(0, F, -F, 0), matrix(0, -F, F, 0));
        assert_eq!(upright.turns, 0);
        let half = Display::from_matrices(matrix(0, F, -F, 0), matrix(0, F, -F, 0));
        assert_eq!(half.turns, 2);
        // No `mvhd` is a zero matrix to FFmpeg: nothing turns.
        assert_eq!(Display::from_matrices(matrix(0, F, -F, 0), [0; 9]).turns, 0);
    }

    #[test]
    fn a_turned_frame_is_torchs_rot90_of_it() {
        // A 3x2 frame whose pixels are numbered 0..6 row by row.
        let rgb: Vec<u8> = (0..6u8).flat_map(|p| [p, p, p]).collect();
        let turned = |k| {
            let mut out = Vec::new();
            turn(&rgb, (3, 2), k, &mut out);
            out.chunks_exact(3).map(|p| p[0]).collect::<Vec<u8>>()
        };
        // numpy.rot90 of [[0 1 2] [3 4 5]]: k=1 [[2 5] [1 4] [0 3]], k=2 [[5 4 3] [2 1 0]],
        // k=3 [[3 0] [4 1] [5 2]].
        assert_eq!(turned(1), [2, 5, 1, 4, 0, 3]);
        assert_eq!(turned(2), [5, 4, 3, 2, 1, 0]);
        assert_eq!(turned(3), [3, 0, 4, 1, 5, 2]);
        assert_eq!(turned(0), [0, 1, 2, 3, 4, 5]);
        assert_eq!(
            Display {
                turns: 1,
                matrix: true
            }
            .size((3, 2)),
            (2, 3)
        );
    }
}
