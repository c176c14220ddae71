//! Which lines share a forward pass ([`super::Explainer::forward_many`]): lines of near
//! lengths, each padded to its group's longest, as many as the group size, the tokens of a
//! pass and the memory bound allow.

/// How lines are grouped into forward passes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Grouping {
    /// The most lines in one forward pass.
    pub size: usize,
    /// The most bytes a group's attention may take on the device while it runs (each
    /// layer's heads' logits and probabilities, and every layer's fusion kept): long lines
    /// make smaller groups, down to one line.
    pub bytes: usize,
    /// The most padding a group may add, as a share of its real tokens.
    pub padding: f64,
    /// The most tokens, padding included, in one pass: beyond them the CPU's products get no
    /// faster per row, and the reports wait longer for their group.
    pub tokens: usize,
}

/// A few tokens of padding are always allowed, so that short lines, a quarter of whose
/// tokens is a token or two, still share passes.
const PADDING_FREE: usize = 8;

impl Grouping {
    /// A line at a time: the forward pass of a text alone.
    pub const ONE: Grouping = Grouping {
        size: 1,
        bytes: usize::MAX,
        padding: 0.0,
        tokens: usize::MAX,
    };

    /// Batch mode's group size unless `--batch-size` says otherwise.
    pub const DEFAULT_SIZE: usize = 8;

    /// The most `--batch-size` takes.
    pub const MAX_SIZE: usize = 256;

    /// Batch mode's memory bound: 1 GiB of attention per group.
    pub const DEFAULT_BYTES: usize = 1 << 30;

    /// Batch mode's padding bound: a quarter of a group's tokens.
    pub const DEFAULT_PADDING: f64 = 0.25;

    /// Batch mode's tokens a pass. Measured on a bert-base shape, 2 cores (scripts/bench/
    /// RESULTS.md): at n = 128, 8 lines a pass took 0.61 of the time of one, and 16 the
    /// same as 8; at n = 512, 2 lines a pass 0.95 of one, and 8 lines 1.16.
    pub const DEFAULT_TOKENS: usize = 1024;

    /// Batch mode's grouping with `size` lines at most.
    pub fn of(size: usize) -> Self {
        Self {
            size: size.max(1),
            bytes: Self::DEFAULT_BYTES,
            padding: Self::DEFAULT_PADDING,
            tokens: Self::DEFAULT_TOKENS,
        }
    }

    /// The groups of `lines` (each its length and what must be equal within a group, such
    /// as the head fusion), as indices into `lines`. Within each key, sorted by length, a
    /// line joins the group before it while the group has room ([`Grouping::size`],
    /// [`Grouping::tokens`], the bytes that `heads` and `layers` take at its length), the
    /// padding stays small, and `alike(n, to)` says every member may be padded to it.
    pub fn plan<K: PartialEq>(
        &self,
        lines: &[(usize, K)],
        (heads, layers): (usize, usize),
        alike: impl Fn(usize, usize) -> bool,
    ) -> Vec<Vec<usize>> {
        let mut order: Vec<usize> = (0..lines.len()).collect();
        order.sort_by_key(|&i| lines[i].0);
        let mut groups: Vec<Vec<usize>> = Vec::new();
        let mut keys: Vec<&K> = Vec::new();
        for (_, key) in lines {
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
        for key in keys {
            let start = groups.len();
            for &i in order.iter().filter(|&&i| lines[i].1 == *key) {
                let to = lines[i].0;
                let joins = groups[start..].last().is_some_and(|group| {
                    let members = group.len() + 1;
                    let tokens = group.iter().map(|&j| lines[j].0).sum::<usize>() + to;
                    let padded = (members * to - tokens) as f64;
                    let small = padded <= self.padding * tokens as f64
                        || to - lines[group[0]].0 <= PADDING_FREE;
                    // A line of one token runs alone: candle's CPU products of one row
                    // take another kernel than those of several (gemv), whose rounding
                    // differs (5e-5 measured at 768 wide).
                    lines[group[0]].0 > 1
                        && members <= self.size
                        && members * to <= self.tokens
                        && members.saturating_mul(bytes_per_line(to, heads, layers)) <= self.bytes
                        && small
                        && group.iter().all(|&j| alike(lines[j].0, to))
                });
                match (joins, groups.last_mut()) {
                    (true, Some(group)) => group.push(i),
                    _ => groups.push(vec![i]),
                }
            }
        }
        groups
    }
}

/// A slot per line: its error, or `None` while its result is to come.
pub type Slots<R, E> = Vec<Option<Result<R, E>>>;

/// Lines checked before they are grouped: a slot per line, and the lines that passed, each
/// with its index.
pub fn sift<T, R, E>(
    checked: impl IntoIterator<Item = Result<T, E>>,
) -> (Slots<R, E>, Vec<(usize, T)>) {
    let (mut slots, mut passed) = (Vec::new(), Vec::new());
    for (i, line) in checked.into_iter().enumerate() {
        match line {
            Ok(line) => {
                passed.push((i, line));
                slots.push(None);
            }
            Err(e) => slots.push(Some(Err(e))),
        }
    }
    (slots, passed)
}

/// What one line of `n` tokens takes of a group's device memory: a layer's logits,
/// exponentials and probabilities in f32 for every head, and every layer's fusion in f64.
fn bytes_per_line(n: usize, heads: usize, layers: usize) -> usize {
    n.saturating_mul(n).saturating_mul(
        heads
            .saturating_mul(3 * 4)
            .saturating_add(layers.saturating_mul(8)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(grouping: Grouping, lengths: &[usize]) -> Vec<Vec<usize>> {
        let lines: Vec<(usize, ())> = lengths.iter().map(|&n| (n, ())).collect();
        grouping.plan(&lines, (12, 12), |_, _| true)
    }

    #[test]
    fn near_lengths_share_a_pass_up_to_the_size() {
        let grouping = Grouping::of(3);
        // 10, 12, 12 join (a few tokens are free), 14 starts a new group (size 3); 200
        // is far from 14, and 210 joins it (5% padding).
        assert_eq!(
            plan(grouping, &[12, 200, 10, 14, 12, 210]),
            vec![vec![2, 0, 4], vec![3], vec![1, 5]]
        );
        assert_eq!(plan(Grouping::ONE, &[5, 5]), vec![vec![0], vec![1]]);
        assert_eq!(plan(grouping, &[1, 1, 2]), vec![vec![0], vec![1], vec![2]]);
        assert!(plan(grouping, &[]).is_empty());
    }

    #[test]
    fn a_pass_holds_at_most_1024_tokens() {
        let groups = plan(
            Grouping::of(8),
            &[512, 512, 512, 128, 128, 128, 128, 128, 128, 128, 128, 128],
        );
        let sizes: Vec<usize> = groups.iter().map(Vec::len).collect();
        assert_eq!(sizes, [8, 1, 2, 1]);
    }

    #[test]
    fn padding_stays_within_a_quarter_of_the_tokens() {
        let grouping = Grouping::of(8);
        // 100 and 125 padded to 2·125 = 250 tokens against 225: 11% more, together; 100
        // and 200 padded to 400 against 300: a third more, apart.
        assert_eq!(plan(grouping, &[100, 125]), vec![vec![0, 1]]);
        assert_eq!(plan(grouping, &[100, 200]), vec![vec![0], vec![1]]);
    }

    #[test]
    fn long_lines_make_smaller_groups_and_keys_and_alikeness_keep_lines_apart() {
        // 512 tokens, 12 heads, 12 layers: 63 MB a line; 1 GiB holds 17 of them.
        assert_eq!(bytes_per_line(512, 12, 12), 62_914_560);
        let unbounded = Grouping {
            tokens: usize::MAX,
            ..Grouping::of(64)
        };
        let long = unbounded.plan(&[(512, ()); 20], (12, 12), |_, _| true);
        assert_eq!(long.iter().map(Vec::len).collect::<Vec<_>>(), [17, 3]);
        let keyed = [(10, 'a'), (10, 'b'), (10, 'a')];
        let groups = Grouping::of(8).plan(&keyed, (1, 1), |_, _| true);
        assert_eq!(groups, vec![vec![0, 2], vec![1]]);
        // A line may not be padded past 11 (LongRoPE's switch at 10, say).
        let unkeyed = [(10, ()), (12, ())];
        let apart = Grouping::of(8).plan(&unkeyed, (1, 1), |n, to| n > 10 || to <= 10);
        assert_eq!(apart, vec![vec![0], vec![1]]);
    }
}
